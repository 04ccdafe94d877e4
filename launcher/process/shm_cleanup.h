// Where a job's shared-memory segments live, so that the launcher can sweep them: the worker
// library's shared-memory data plane names each segment /dev/shm/hvrun-shm-<job id>-<host>-<hash>
// (worker_lib/backends/shm/shm_segment.cc, segment_prefix(); tests/worker/shm_job_test.cc
// checks that both agree). Workers unlink their segment as soon as every rank of the host mapped
// it; the sweep covers a job that dies before that.
#pragma once

#include <string>

namespace hvrun::launcher {

inline constexpr const char* kShmDirectory = "/dev/shm";

// The name prefix of every segment of `job_id` (job ids hvrun makes are [a-z0-9-] only; other
// characters are replaced as the worker library does).
inline std::string shm_segment_prefix(const std::string& job_id) {
  std::string safe;
  for (char c : job_id) {
    if (safe.size() >= 100) break;
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.';
    safe += keep ? c : '_';
  }
  return "hvrun-shm-" + safe + "-";
}

}  // namespace hvrun::launcher

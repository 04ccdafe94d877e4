#include "worker_lib/backends/gloo/descriptor_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace hvrun::detail {
namespace {

// Room for what the process opens besides the mesh meanwhile (logs, gRPC, shm, the trainer's).
constexpr rlim_t kHeadroom = 64;

// Descriptors open in this process now (an estimate: -1 when /proc is not there).
long open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long n = 0;
  while (const dirent* entry = ::readdir(dir))
    if (entry->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n - 1;  // the directory's own descriptor
}

}  // namespace

Status ensure_descriptors_for_mesh(int rank, int peers) {
  if (peers <= 0) return Status::ok();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::ok();  // nothing to go on
  const long open = open_descriptors();
  const rlim_t needed =
      static_cast<rlim_t>(open < 0 ? 0 : open) + 2 * static_cast<rlim_t>(peers) + kHeadroom;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return Status::ok();
  const std::string figures =
      "a Gloo mesh with " + std::to_string(peers) + " peers needs about " +
      std::to_string(needed) + " file descriptors on rank " + std::to_string(rank) + " (" +
      std::to_string(open) + " open now, a socket per peer and two while one connects)";
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed)
    return resource_exhausted(
        figures + ", but this process may open at most " + std::to_string(limit.rlim_max) +
        " (hard limit; soft " + std::to_string(limit.rlim_cur) +
        "): raise it where the ranks start (ulimit -Hn, systemd LimitNOFILE=, docker run "
        "--ulimit nofile=, Slurm's PropagateResourceLimits)");
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    return resource_exhausted(figures + "; raising the soft limit from " +
                              std::to_string(before) + " failed: " + std::strerror(errno));
  SPDLOG_DEBUG("{}: raised the soft limit from {} to {}", figures, before, needed);
  return Status::ok();
}

}  // namespace hvrun::detail

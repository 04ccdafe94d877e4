// The words of the GPU data plane's errors, kept apart from CUDA and NCCL so they are unit-tested
// on any machine (tests/worker/nccl_errors_test.cc). Every message says what failed, on which
// rank, host and GPU, and what to try.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::detail::cuda {

// Who is failing, for every message.
struct RankIdentity {
  int rank = 0;
  int size = 1;
  std::string host;
  std::string gpu;  // "GPU 0 (NVIDIA H200, PCI 0000:3b:00.0)", or empty before selection
};

// An NCCL call that returned an error (or an asynchronous error found while polling).
struct NcclFailure {
  std::string what;         // "ncclAllReduce of 'grad.w' (4096 float32)", "communicator init"
  int code = 0;             // ncclResult_t
  std::string code_name;    // "ncclRemoteError"
  std::string description;  // ncclGetErrorString
  std::string last_error;   // ncclGetLastError (may be empty)
};

// kInternal (kUnavailable for a remote/system error) with the hints that fit the code.
Status nccl_failure_status(const RankIdentity& who, const NcclFailure& failure);

// A CUDA runtime call that failed.
Status cuda_failure_status(const RankIdentity& who, const std::string& what,
                           const std::string& error_name, const std::string& error_text);

// The op timeout ran out while `what` was still running on the GPU (the communicator was aborted).
Status gpu_timeout_status(const RankIdentity& who, const std::string& what,
                          std::chrono::milliseconds timeout);

// One GPU per rank: ranks[r] is rank r's host and PCI bus id. Two ranks on the same host with
// the same bus id -> kFailedPrecondition naming both (NCCL would only say "Duplicate GPU
// detected"). Empty bus ids are ignored.
struct GpuOfRank {
  std::string host;
  std::string bus_id;
  int ordinal = -1;
};
Status check_one_gpu_per_rank(std::span<const GpuOfRank> ranks);

// The plugin could not be loaded: every place tried with the loader's reason, then what to do.
struct PluginAttempt {
  std::string path;
  std::string error;  // dlerror()
};
Status plugin_missing_status(const std::vector<PluginAttempt>& attempts, bool built_with_cuda);

// A CUDA tensor on a build without the CUDA data plane.
Status cuda_not_built_status(const std::string& tensor);

// NCCL's result-code name for `code` (ncclSuccess ... ncclInProgress).
std::string nccl_code_name(int code);

}  // namespace hvrun::detail::cuda

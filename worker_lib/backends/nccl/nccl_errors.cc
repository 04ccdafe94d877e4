#include "worker_lib/backends/nccl/nccl_errors.h"

#include <map>
#include <utility>

namespace hvrun::detail::cuda {
namespace {

// Values of ncclResult_t (stable since NCCL 2.0; ncclInProgress since 2.14).
enum : int {
  kNcclSuccess = 0,
  kNcclUnhandledCudaError = 1,
  kNcclSystemError = 2,
  kNcclInternalError = 3,
  kNcclInvalidArgument = 4,
  kNcclInvalidUsage = 5,
  kNcclRemoteError = 6,
  kNcclInProgress = 7,
};

std::string where(const RankIdentity& who) {
  std::string s = "rank " + std::to_string(who.rank) + " of " + std::to_string(who.size);
  if (!who.host.empty()) s += " on host " + who.host;
  if (!who.gpu.empty()) s += ", " + who.gpu;
  return s;
}

}  // namespace

std::string nccl_code_name(int code) {
  switch (code) {
    case kNcclSuccess: return "ncclSuccess";
    case kNcclUnhandledCudaError: return "ncclUnhandledCudaError";
    case kNcclSystemError: return "ncclSystemError";
    case kNcclInternalError: return "ncclInternalError";
    case kNcclInvalidArgument: return "ncclInvalidArgument";
    case kNcclInvalidUsage: return "ncclInvalidUsage";
    case kNcclRemoteError: return "ncclRemoteError";
    case kNcclInProgress: return "ncclInProgress";
    default: return "ncclResult " + std::to_string(code);
  }
}

Status nccl_failure_status(const RankIdentity& who, const NcclFailure& f) {
  std::string m = "NCCL " + f.what + " failed on " + where(who) + ": " +
                  (f.code_name.empty() ? nccl_code_name(f.code) : f.code_name);
  if (!f.description.empty()) m += " (" + f.description + ")";
  if (!f.last_error.empty()) m += ": " + f.last_error;
  m += ". Try: NCCL_DEBUG=INFO for NCCL's own log of the failure";
  switch (f.code) {
    case kNcclRemoteError:
    case kNcclSystemError:
      m += "; a peer rank may have died (look for its error first); across hosts set "
           "NCCL_SOCKET_IFNAME=<interface> (e.g. =eth0) and check that hosts reach each other; "
           "NCCL_IB_DISABLE=1 if InfiniBand/RoCE is misconfigured";
      break;
    case kNcclUnhandledCudaError:
      m += "; NCCL_P2P_DISABLE=1 (hvrun --nccl-p2p off) when GPU peer-to-peer is broken (PCIe "
           "ACS, virtual machines, GeForce cards); check the driver with nvidia-smi";
      break;
    case kNcclInvalidUsage:
    case kNcclInvalidArgument:
      m += "; every rank must run the same collectives in the same order with one GPU each "
           "(an hvrun bug if the plan said so: please report it)";
      break;
    default:
      m += "; NCCL_P2P_DISABLE=1 (hvrun --nccl-p2p off) if it hangs or fails between GPUs of "
           "one host; NCCL_SOCKET_IFNAME=<interface> across hosts";
  }
  StatusCode code = (f.code == kNcclRemoteError || f.code == kNcclSystemError)
                          ? StatusCode::kUnavailable
                          : StatusCode::kInternal;
  return Status(code, std::move(m));
}

Status cuda_failure_status(const RankIdentity& who, const std::string& what,
                           const std::string& error_name, const std::string& error_text) {
  std::string m = "CUDA " + what + " failed on " + where(who) + ": " + error_name;
  if (!error_text.empty()) m += " (" + error_text + ")";
  if (error_name == "cudaErrorInsufficientDriver" || error_name == "cudaErrorNoDevice")
    m += ". This process sees no usable GPU: check `nvidia-smi`, CUDA_VISIBLE_DEVICES, and that "
         "the driver supports CUDA 13 (driver >= 580); or run CPU tensors (--device cpu)";
  else if (error_name == "cudaErrorMemoryAllocation")
    m += ". The GPU is out of memory: lower --fusion-threshold-mb or the batch size";
  else if (error_name == "cudaErrorInvalidDevice")
    m += ". The tensor names a GPU this process does not see: check the tensor's device ordinal "
         "against CUDA_VISIBLE_DEVICES";
  return Status(StatusCode::kInternal, std::move(m));
}

Status gpu_timeout_status(const RankIdentity& who, const std::string& what,
                          std::chrono::milliseconds timeout) {
  return Status(StatusCode::kDeadlineExceeded,
                "NCCL " + what + " on " + where(who) + " did not finish within the op timeout (" +
                    (timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                                 : std::to_string(timeout.count()) + " ms") +
                    ", --op-timeout); the communicator was aborted. A peer rank is probably "
                    "stuck or dead (look for its error), or GPUs cannot reach each other: try "
                    "NCCL_DEBUG=INFO, NCCL_P2P_DISABLE=1 (hvrun --nccl-p2p off) within a host, "
                    "NCCL_SOCKET_IFNAME=<interface> across hosts");
}

Status check_one_gpu_per_rank(std::span<const GpuOfRank> ranks) {
  std::map<std::pair<std::string, std::string>, size_t> first_user;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].bus_id.empty()) continue;
    auto [it, inserted] = first_user.emplace(std::make_pair(ranks[r].host, ranks[r].bus_id), r);
    if (inserted) continue;
    const size_t other = it->second;
    return failed_precondition(
        "ranks " + std::to_string(other) + " and " + std::to_string(r) + " on host " +
        ranks[r].host + " both use the GPU at PCI " + ranks[r].bus_id + " (CUDA device " +
        std::to_string(ranks[other].ordinal) + " and " + std::to_string(ranks[r].ordinal) +
        " in their processes); NCCL needs one GPU per rank (it would fail with \"Duplicate GPU "
        "detected\"). Start at most one rank per GPU (hvrun -np <GPUs>), put each rank's tensors "
        "on the GPU of its local rank, or use CPU tensors (--device cpu)");
  }
  return Status::ok();
}

Status plugin_missing_status(const std::vector<PluginAttempt>& attempts, bool built_with_cuda) {
  if (!built_with_cuda) return cuda_not_built_status("");
  std::string m = "CUDA tensors need hvrun's GPU data plane (libhvrun_cuda.so) and NCCL "
                  "(libnccl.so.2), which could not be loaded. Tried:";
  bool nccl_missing = false;
  for (const auto& a : attempts) {
    m += "\n  " + a.path + ": " + a.error;
    if (a.error.find("libnccl") != std::string::npos) nccl_missing = true;
  }
  if (nccl_missing)
    m += "\nNCCL is missing: install it (apt install libnccl2, or the NCCL tarball), or use "
         "PyTorch's copy: export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.nccl, os; "
         "print(os.path.join(nvidia.nccl.__path__[0], \"lib\"))'):$LD_LIBRARY_PATH";
  else
    m += "\nPut libhvrun_cuda.so next to libhvrun.so (it is built there when CUDA is found), "
         "or on LD_LIBRARY_PATH; it also needs libnccl.so.2 (e.g. PyTorch's nvidia/nccl/lib) "
         "on LD_LIBRARY_PATH";
  return failed_precondition(std::move(m));
}

Status cuda_not_built_status(const std::string& tensor) {
  return failed_precondition(
      (tensor.empty() ? std::string("a CUDA tensor") : "tensor '" + tensor + "' is a CUDA tensor") +
      " but this libhvrun was built without CUDA/NCCL (`hvrun --check-build` says so); rebuild "
      "with the CUDA toolkit and NCCL present (-DHVRUN_WITH_CUDA=ON), or pass host tensors");
}

}  // namespace hvrun::detail::cuda

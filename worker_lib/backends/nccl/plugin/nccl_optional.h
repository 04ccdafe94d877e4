// NCCL functions newer than the oldest libnccl.so.2 hvrun runs with, looked up at run time
// (dlsym in the loaded libnccl), so the plugin still loads beside an older NCCL: calling one of
// them directly would make libhvrun_cuda.so fail to load there with an undefined symbol.
#pragma once

#include <nccl.h>

#include <string>

namespace hvrun::detail::cuda {

struct NcclOptional {
  // User-buffer registration (NCCL 2.19): NCCL reads and writes a registered buffer in place
  // of copying through its own staging buffers.
  decltype(&ncclCommRegister) comm_register = nullptr;
  decltype(&ncclCommDeregister) comm_deregister = nullptr;
  // Revoking a communicator and shrinking it to the survivors (NCCL 2.27 / 2.28).
  decltype(&ncclCommRevoke) comm_revoke = nullptr;
  decltype(&ncclCommShrink) comm_shrink = nullptr;

  // The running NCCL's, resolved once per process.
  static const NcclOptional& get();
  // "ncclCommRegister yes, ncclCommShrink no, ..." for logs.
  std::string describe() const;
};

}  // namespace hvrun::detail::cuda

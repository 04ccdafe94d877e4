// What this build of hvrun contains, as constants (from the generated build_config.h).
#pragma once

#include <string>
#include <string_view>

namespace hvrun {

struct BuildInfo {
  std::string_view version;
  std::string_view build_type;
  bool have_cuda;
  bool have_nccl;
  int nccl_version_code;  // NCCL_VERSION_CODE, e.g. 22809; 0 without NCCL
  std::string_view nccl_version;
  std::string_view cuda_version;
  bool have_gloo;
  std::string_view gloo_version;
  bool have_mpi;
  std::string_view mpi_version;
  bool have_python;  // the hvrun and hvrun.torch Python packages (Horovod's PyTorch API)
  bool have_tensorflow;  // hvrun.tensorflow's op library (python/tf_ops/)
  std::string_view grpc_version;
  std::string_view protobuf_version;
};

const BuildInfo& build_info();

// Multi-line human-readable summary, as `hvrun --check-build` prints it: first horovodrun
// --check-build's blocks (Available Frameworks / Controllers / Tensor Operations, [X] for what
// this build has), then hvrun's own.
std::string describe_build();

}  // namespace hvrun

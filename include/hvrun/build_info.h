// What this build of hvrun contains (CUDA, NCCL, Gloo, MPI and their versions), for programs:
// hvrun::build_info() and hvrun::describe_build(), as `hvrun --check-build` prints them
// (filled from the generated build_config.h, in common/build_info.cc).
#ifndef HVRUN_BUILD_INFO_H_  // a guard, not #pragma once: installed and source copies may both be seen
#define HVRUN_BUILD_INFO_H_

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

#endif  // HVRUN_BUILD_INFO_H_

#include "common/build_info.h"

#include <sstream>

#include "hvrun/build_config.h"

namespace hvrun {

const BuildInfo& build_info() {
  static const BuildInfo info{
      .version = HVRUN_VERSION_STRING,
      .build_type = HVRUN_BUILD_TYPE,
      .have_cuda = HVRUN_HAVE_CUDA != 0,
      .have_nccl = HVRUN_HAVE_CUDA != 0 && HVRUN_NCCL_VERSION_CODE > 0,
      .nccl_version_code = HVRUN_NCCL_VERSION_CODE,
      .nccl_version = HVRUN_NCCL_VERSION,
      .cuda_version = HVRUN_HAVE_CUDA != 0 ? HVRUN_CUDA_VERSION : "none",
      .have_gloo = HVRUN_HAVE_GLOO != 0,
      .gloo_version = HVRUN_GLOO_VERSION,
      .have_mpi = HVRUN_HAVE_MPI != 0,
      .mpi_version = HVRUN_HAVE_MPI != 0 ? HVRUN_MPI_VERSION : "none",
      .have_python = HVRUN_HAVE_PYTHON != 0,
      .have_tensorflow = HVRUN_HAVE_TENSORFLOW != 0,
      .grpc_version = HVRUN_GRPC_VERSION,
      .protobuf_version = HVRUN_PROTOBUF_VERSION,
  };
  return info;
}

std::string describe_build() {
  const BuildInfo& b = build_info();
  auto mark = [](bool on) { return on ? "[X]" : "[ ]"; };
  std::ostringstream out;
  // Horovod's layout, which scripts and issue templates grep. hvrun's controller is its own
  // coordinator, neither MPI nor Gloo; its MPI build option is the mpirun hand-off, not an MPI
  // data plane, so no MPI tensor operations.
  out << "hvrun v" << b.version << ":\n\n"
      << "Available Frameworks:\n"
      << "    " << mark(b.have_tensorflow) << " TensorFlow\n"
      << "    " << mark(b.have_python) << " PyTorch\n"
      << "    [ ] MXNet\n\n"
      << "Available Controllers:\n"
      << "    [ ] MPI\n"
      << "    [ ] Gloo\n"
      << "    [X] hvrun coordinator (gRPC)\n\n"
      << "Available Tensor Operations:\n"
      << "    " << mark(b.have_nccl) << " NCCL\n"
      << "    [ ] DDL\n"
      << "    [ ] CCL\n"
      << "    [ ] MPI\n"
      << "    " << mark(b.have_gloo) << " Gloo\n"
      << "    [X] Shared memory\n\n";
  out << "hvrun v" << b.version << " (" << b.build_type << ")\n\n"
      << "Available data planes:\n"
      << "    " << mark(b.have_gloo) << " Gloo (CPU tensors) " << b.gloo_version << "\n"
      << "    " << mark(b.have_nccl) << " NCCL (CUDA tensors) " << b.nccl_version
      << (b.have_cuda ? std::string(", CUDA ") + std::string(b.cuda_version) : std::string()) << "\n"
      << "    " << mark(b.have_mpi) << " MPI (Open MPI hand-off) " << b.mpi_version << "\n\n"
      << "Control plane:\n"
      << "    gRPC " << b.grpc_version << ", protobuf " << b.protobuf_version << "\n";
  return out.str();
}

}  // namespace hvrun

// BuildFacts from common/build_info.h, plus the lowest CUDA architecture compiled (passed in by
// launcher/doctor/CMakeLists.txt from CMAKE_CUDA_ARCHITECTURES, e.g. "75;80;90").
#include <sstream>

#include "common/build_info.h"
#include "launcher/doctor/machine.h"

#ifndef HVRUN_DOCTOR_CUDA_ARCHITECTURES
#define HVRUN_DOCTOR_CUDA_ARCHITECTURES ""
#endif

namespace hvrun::doctor {

BuildFacts this_build() {
  const hvrun::BuildInfo& info = hvrun::build_info();
  BuildFacts b;
  b.have_cuda = info.have_cuda;
  b.cuda_version = std::string(info.cuda_version);
  b.nccl_version_code = info.have_nccl ? info.nccl_version_code : 0;
  b.nccl_version = std::string(info.nccl_version);
  if (b.have_cuda) {
    std::stringstream in(HVRUN_DOCTOR_CUDA_ARCHITECTURES);
    std::string arch;
    while (std::getline(in, arch, ';')) {
      int value = 0;
      for (char c : arch) {
        if (c < '0' || c > '9') break;
        value = value * 10 + (c - '0');
      }
      if (value > 0 && (b.min_compute_capability == 0 || value < b.min_compute_capability))
        b.min_compute_capability = value;
    }
  }
  return b;
}

}  // namespace hvrun::doctor

// --device cuda in a build without CUDA.
#include "staging.h"

namespace train {

std::unique_ptr<Staging> make_cuda_staging(int, std::string& error) {
  error = "this build of hvrun has no CUDA (configure with the CUDA toolkit and NCCL present, "
          "-DHVRUN_WITH_CUDA=ON)";
  return nullptr;
}

}  // namespace train

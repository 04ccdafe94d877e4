// Two-rank smoke trainer of the installed C++ API: every rank contributes rank+1, so the sum of
// a tensor of 1024 floats is size*(size+1)/2 everywhere.
#include <cstdio>
#include <vector>

#include "hvrun/build_info.h"
#include "hvrun/hvrun.h"

int main() {
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init: %s\n", worker.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **worker;
  std::vector<float> grad(1024, static_cast<float>(w.rank() + 1));
  hvrun::TensorView view{grad.data(), hvrun::DataType::kFloat32, {1024}};
  for (int step = 0; step < 3; ++step) {
    std::fill(grad.begin(), grad.end(), static_cast<float>(w.rank() + 1));
    hvrun::Status s = w.allreduce("grad", view);
    if (!s.is_ok()) {
      std::fprintf(stderr, "allreduce: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  const float want = w.size() * (w.size() + 1) / 2.0f;
  for (float x : grad) {
    if (x != want) {
      std::fprintf(stderr, "rank %d: got %g, want %g\n", w.rank(), x, want);
      return 1;
    }
  }
  std::printf("consumer rank %d of %d: allreduce ok (%s, hvrun %s)\n", w.rank(), w.size(),
              hvrun::build_info().have_cuda ? "CUDA" : "CPU", hvrun::version());
  return w.shutdown().is_ok() ? 0 : 1;
}

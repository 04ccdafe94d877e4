// hvrun_shm_test_worker: one rank of the shared-memory data plane's job tests (shm_job_test.cc).
// Rank 0 first prints "job=<HVRUN_JOB_ID>" so that the test knows the segment's name.
//
//   normal        init, a large and a tiny allreduce checked against the reference, exit 0
//   rank1-fails   rank 1 exits 3 before init; rank 0 waits in the segment set-up meanwhile
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "normal";
  const char* rank_text = std::getenv("HVRUN_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  if (rank == 0) {
    const char* job = std::getenv("HVRUN_JOB_ID");
    std::printf("job=%s\n", job ? job : "");
    std::fflush(stdout);
  }
  if (rank == 1 && mode == "rank1-fails") return 3;
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().to_string().c_str());
    return 2;
  }
  hvrun::Worker& w = **worker;
  const int size = w.size();
  for (int64_t n : {int64_t{3}, int64_t{3} << 20}) {
    std::vector<float> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      data[static_cast<size_t>(i)] = static_cast<float>((i % 5) + rank);
    hvrun::TensorView view{data.data(), hvrun::DataType::kFloat32, {n}};
    hvrun::Status s = w.allreduce("t" + std::to_string(n), view);
    if (!s.is_ok()) {
      std::fprintf(stderr, "allreduce failed: %s\n", s.to_string().c_str());
      return 1;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float want = static_cast<float>(size * (i % 5) + size * (size - 1) / 2);
      if (data[static_cast<size_t>(i)] != want) {
        std::fprintf(stderr, "element %lld: %g, expected %g\n", static_cast<long long>(i),
                     data[static_cast<size_t>(i)], want);
        return 1;
      }
    }
  }
  std::printf("rank %d ok\n", rank);
  return 0;
}

// hvrun_allreduce_memory_worker: one rank of a job that measures what a large allreduce costs in
// resident memory beyond the tensor itself. Each rank fills a float32 tensor of --mib MiB
// (in place, or input and output with --out-of-place), runs one small allreduce so that
// everything the library sets up once is in place, resets its peak (/proc/self/clear_refs),
// then runs --times allreduces of the tensor (blocking, the same name: after the first, a
// blocking call on one host may take the fast path) and prints
//
//   rank R: extra_peak_mib X (tensor M MiB)
//
// X: the peak resident set (VmHWM) during the allreduces minus the resident set before them.
// Exits 1 when a result is wrong.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"

namespace {

// A /proc/self/status field in KiB ("VmRSS", "VmHWM"); -1 when unreadable.
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 256;
  int times = 2;
  bool out_of_place = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = std::atol(argv[++i]);
    else if (std::strcmp(argv[i], "--times") == 0 && i + 1 < argc) times = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--out-of-place") == 0) out_of_place = true;
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--times N] [--out-of-place]\n", argv[0]);
      return 2;
    }
  }
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init: %s\n", worker.status().message().c_str());
    return 1;
  }
  hvrun::Worker& w = **worker;
  const int rank = w.rank();
  const int size = w.size();
  const auto count = static_cast<int64_t>(mib) * (1 << 20) / 4;
  std::vector<float> input(static_cast<size_t>(count), 1.0f);
  std::vector<float> output(out_of_place ? static_cast<size_t>(count) : 0, 0.0f);
  std::vector<float> small(1024, 1.0f);
  if (auto s = w.allreduce("warm-up", {small.data(), hvrun::DataType::kFloat32, {1024}}); !s.is_ok()) {
    std::fprintf(stderr, "rank %d: warm-up: %s\n", rank, s.message().c_str());
    return 1;
  }
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";  // VmHWM := VmRSS
  }
  const long before = status_kib("VmRSS");
  float expected = 1.0f;
  for (int t = 0; t < times; ++t) {
    hvrun::Status s =
        out_of_place
            ? w.allreduce("big", {input.data(), hvrun::DataType::kFloat32, {count}},
                          {output.data(), hvrun::DataType::kFloat32, {count}})
            : w.allreduce("big", {input.data(), hvrun::DataType::kFloat32, {count}});
    if (!s.is_ok()) {
      std::fprintf(stderr, "rank %d: allreduce: %s\n", rank, s.message().c_str());
      return 1;
    }
    if (!out_of_place) expected *= static_cast<float>(size);
  }
  const long peak = status_kib("VmHWM");
  const std::vector<float>& result = out_of_place ? output : input;
  const float want = out_of_place ? static_cast<float>(size) : expected;
  for (size_t i = 0; i < result.size(); i += 4099)
    if (result[i] != want) {
      std::fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, result[i], want);
      return 1;
    }
  std::printf("rank %d: extra_peak_mib %.1f (tensor %ld MiB)\n", rank,
              static_cast<double>(peak - before) / 1024.0, mib);
  return 0;
}

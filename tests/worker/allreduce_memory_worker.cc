// hvrun_allreduce_memory_worker: one rank of a job that measures what a large allreduce costs in
// resident memory beyond the tensor itself. Each rank fills a tensor of --mib MiB of ones,
// float32 or (--float16) float16 (in place, or input and output with --out-of-place), runs one small allreduce so that
// everything the library sets up once is in place, resets its peak (/proc/self/clear_refs),
// then runs --times allreduces of the tensor (blocking, the same name: after the first, a
// blocking call on one host may take the fast path) and prints
//
//   rank R: extra_peak_mib X (tensor M MiB)
//
// X: the peak resident set (VmHWM) during the allreduces minus the resident set before them.
// Exits 1 when a result is wrong (a job of 2 ranks for float16: its results are powers of 2).
#include <cmath>
#include <cstdint>
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

// float16 bits of 2^k (small k).
uint16_t half_power_of_two(int k) { return static_cast<uint16_t>((15 + k) << 10); }

}  // namespace

int main(int argc, char** argv) {
  long mib = 256;
  int times = 2;
  bool out_of_place = false;
  bool half = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = std::atol(argv[++i]);
    else if (std::strcmp(argv[i], "--times") == 0 && i + 1 < argc) times = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--out-of-place") == 0) out_of_place = true;
    else if (std::strcmp(argv[i], "--float16") == 0) half = true;
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--times N] [--out-of-place] [--float16]\n",
                   argv[0]);
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
  const size_t esize = half ? 2 : 4;
  const auto count = static_cast<int64_t>(mib) * (1 << 20) / static_cast<int64_t>(esize);
  const hvrun::DataType dtype = half ? hvrun::DataType::kFloat16 : hvrun::DataType::kFloat32;
  // Ones of the element type, as bytes.
  auto ones = [&](size_t n) {
    std::vector<std::byte> bytes(n * esize);
    for (size_t i = 0; i < n; ++i) {
      if (half) {
        const uint16_t one = half_power_of_two(0);
        std::memcpy(bytes.data() + i * 2, &one, 2);
      } else {
        const float one = 1.0f;
        std::memcpy(bytes.data() + i * 4, &one, 4);
      }
    }
    return bytes;
  };
  std::vector<std::byte> input = ones(static_cast<size_t>(count));
  std::vector<std::byte> output(out_of_place ? input.size() : 0, std::byte{0});
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
  for (int t = 0; t < times; ++t) {
    hvrun::Status s = out_of_place
                          ? w.allreduce("big", {input.data(), dtype, {count}},
                                        {output.data(), dtype, {count}})
                          : w.allreduce("big", {input.data(), dtype, {count}});
    if (!s.is_ok()) {
      std::fprintf(stderr, "rank %d: allreduce: %s\n", rank, s.message().c_str());
      return 1;
    }
  }
  const long peak = status_kib("VmHWM");
  // Every element: size (out of place), or size^times (in place, each call on the last result).
  const double want = out_of_place ? size : std::pow(size, times);
  const std::vector<std::byte>& result = out_of_place ? output : input;
  for (size_t i = 0; i < static_cast<size_t>(count); i += 4099) {
    double got = 0;
    if (half) {
      uint16_t bits = 0;
      std::memcpy(&bits, result.data() + i * 2, 2);
      got = bits == half_power_of_two(static_cast<int>(std::lround(std::log2(want)))) ? want : -1;
    } else {
      float value = 0;
      std::memcpy(&value, result.data() + i * 4, 4);
      got = value;
    }
    if (got != want) {
      std::fprintf(stderr, "rank %d: element %zu is not %g\n", rank, i, want);
      return 1;
    }
  }
  std::printf("rank %d: extra_peak_mib %.1f (tensor %ld MiB)\n", rank,
              static_cast<double>(peak - before) / 1024.0, mib);
  return 0;
}

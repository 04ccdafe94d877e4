// A large allreduce costs little resident memory beyond its tensor: every rank's peak during
// allreduces of a 256 MiB tensor stays within a small bound over what it held before
// (hvrun_allreduce_memory_worker measures it), in place and into another tensor, float32 and
// float16 (reduced in float32), on the shared-memory data plane (one host's default) and on
// Gloo (which stages what it widens).
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

constexpr int kTensorMib = 256;
// A chunked data plane needs a few MiB of its own whatever the size; a copy of the tensor, or a
// part of it in proportion, is far more. What Gloo widens (float16 to float32) also takes one
// staging window (64 MiB: worker_lib/backend.h).
constexpr double kMostExtraMib = 24;
constexpr double kStagingWindowMib = 64;

void expect_small_extra(const std::string& backend, bool out_of_place, bool half = false) {
  std::vector<std::string> args = {"-np", "2", "-H", "localhost:2", "--cpu-backend", backend,
                                   bin_path("hvrun_allreduce_memory_worker"), "--mib",
                                   std::to_string(kTensorMib)};
  if (out_of_place) args.push_back("--out-of-place");
  if (half) args.push_back("--float16");
  HvrunProcess job(args, {{"HVRUN_DEVICE", "cpu"}});
  const std::optional<int> code = job.wait_exit(std::chrono::seconds(90));
  ASSERT_TRUE(code.has_value()) << job.err();
  ASSERT_EQ(*code, 0) << job.out() << job.err();
  std::regex line(R"(rank (\d): extra_peak_mib ([0-9.-]+))");
  const double most = kMostExtraMib + (half && backend == "gloo" ? kStagingWindowMib : 0);
  int ranks = 0;
  const std::string out = job.out();
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it, ++ranks)
    EXPECT_LT(std::stod((*it)[2]), most)
        << backend << (half ? ", float16" : ", float32")
        << (out_of_place ? ", out of place" : ", in place") << ": rank " << (*it)[1]
        << " held " << (*it)[2] << " MiB more than before for a " << kTensorMib
        << " MiB allreduce\n" << out;
  EXPECT_EQ(ranks, 2) << out << job.err();
}

TEST(AllreduceMemory, ShmInPlace) { expect_small_extra("shm", false); }
TEST(AllreduceMemory, ShmIntoAnotherTensor) { expect_small_extra("shm", true); }
TEST(AllreduceMemory, GlooInPlace) { expect_small_extra("gloo", false); }
TEST(AllreduceMemory, GlooIntoAnotherTensor) { expect_small_extra("gloo", true); }
TEST(AllreduceMemory, ShmFloat16InPlace) { expect_small_extra("shm", false, true); }
TEST(AllreduceMemory, GlooFloat16InPlace) { expect_small_extra("gloo", false, true); }
TEST(AllreduceMemory, GlooFloat16IntoAnotherTensor) { expect_small_extra("gloo", true, true); }

}  // namespace
}  // namespace hvrun::test

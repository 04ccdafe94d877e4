// --bind-to (launcher/plan/cpu_binding.h): the CPU share of each local rank, and workers really
// started with it (a plain command under hvrun reads its own affinity).
#include "launcher/plan/cpu_binding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "tests/support/child_process.h"

namespace hvrun::launcher {
namespace {

using V = std::vector<int>;

// One CPU per core (this VM's layout) unless said otherwise.
std::vector<V> single(const V& cpus) {
  std::vector<V> cores;
  for (int c : cpus) cores.push_back({c});
  return cores;
}

TEST(CpuBinding, EveryLocalRankGetsItsOwnShareOfCores) {
  EXPECT_EQ(cpu_block(single({0, 1}), 0, 2), V{0});
  EXPECT_EQ(cpu_block(single({0, 1}), 1, 2), V{1});
  // 8 cores over 3 ranks: 3, 3, 2 (the first ranks take the remainder), nothing shared.
  EXPECT_EQ(cpu_block(single({0, 1, 2, 3, 4, 5, 6, 7}), 0, 3), (V{0, 1, 2}));
  EXPECT_EQ(cpu_block(single({0, 1, 2, 3, 4, 5, 6, 7}), 1, 3), (V{3, 4, 5}));
  EXPECT_EQ(cpu_block(single({0, 1, 2, 3, 4, 5, 6, 7}), 2, 3), (V{6, 7}));
  // hvrun's own mask may have holes (taskset, cgroups): shares follow it.
  EXPECT_EQ(cpu_block(single({2, 3, 8, 9}), 1, 2), (V{8, 9}));
}

TEST(CpuBinding, HardwareThreadsOfACoreStayTogether) {
  // The usual numbering: CPU i and i+4 are the two threads of core i. Contiguous CPU ids
  // (0-3 / 4-7) would put both ranks on every core; whole cores do not.
  const std::vector<V> cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(cpu_block(cores, 0, 2), (V{0, 1, 4, 5}));
  EXPECT_EQ(cpu_block(cores, 1, 2), (V{2, 3, 6, 7}));
  // More ranks than cores: hardware threads are shared out.
  EXPECT_EQ(cpu_block({{0, 2}, {1, 3}}, 0, 3), (V{0, 1}));
  EXPECT_EQ(cpu_block({{0, 2}, {1, 3}}, 2, 3), (V{3}));
}

TEST(CpuBinding, FewerCpusThanRanksOrNonsenseBindsNothing) {
  EXPECT_TRUE(cpu_block(single({0}), 0, 2).empty());
  EXPECT_TRUE(cpu_block(single({0, 1}), 2, 2).empty());
  EXPECT_TRUE(cpu_block(single({0, 1}), 0, 0).empty());
}

TEST(CpuBinding, CoresOfThisMachineCoverItsCpusOnce) {
  const std::vector<int> mine = allowed_cpus();
  V seen;
  for (const V& core : cores_of(mine)) seen.insert(seen.end(), core.begin(), core.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, mine);
}

TEST(CpuBinding, ComesFromTheWorkersEnvironment) {
  const std::vector<int> mine = allowed_cpus();
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(binding_for_worker({"HVRUN_LOCAL_RANK=0", "HVRUN_LOCAL_SIZE=1"}).empty());
  EXPECT_TRUE(binding_for_worker({"HVRUN_BIND_TO=none", "HVRUN_LOCAL_RANK=0", "HVRUN_LOCAL_SIZE=1"})
                  .empty());
  EXPECT_EQ(binding_for_worker({"HVRUN_BIND_TO=block", "HVRUN_LOCAL_RANK=0", "HVRUN_LOCAL_SIZE=1"}),
            mine);
}

TEST(CpuBinding, ListsReadLikeTheKernels) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(cpu_list_text({5}), "5");
  EXPECT_EQ(cpu_list_text({}), "");
}

// Each rank prints the CPUs it may run on (the kernel's own list).
std::vector<std::string> cpus_per_rank(const std::vector<std::string>& flags, int np) {
  std::vector<std::string> args = {"-np", std::to_string(np)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"sh", "-c", "echo \"cpus $HVRUN_LOCAL_RANK $(grep Cpus_allowed_list "
                                       "/proc/self/status | cut -f2)\""});
  test::HvrunProcess hvrun(args, {{"HVRUN_DEVICE", "cpu"}});
  auto code = hvrun.wait_exit(std::chrono::seconds(30));
  EXPECT_TRUE(code.has_value() && *code == 0) << hvrun.out() << hvrun.err();
  std::vector<std::string> lists(static_cast<size_t>(np));
  std::smatch m;
  std::string out = hvrun.out();
  static const std::regex re("cpus ([0-9]+) ([0-9,-]+)");
  while (std::regex_search(out, m, re)) {
    const size_t r = std::stoul(m[1].str());
    if (r < lists.size()) lists[r] = m[2].str();
    out = m.suffix();
  }
  return lists;
}

TEST(CpuBinding, WorkersStartOnTheirShareWithBindToBlock) {
  const std::vector<int> mine = allowed_cpus();
  if (mine.size() < 2) GTEST_SKIP() << "needs 2 CPUs, hvrun may use " << mine.size();
  std::vector<std::string> bound = cpus_per_rank({"--bind-to", "block"}, 2);
  EXPECT_EQ(bound[0], cpu_list_text(cpu_block(cores_of(mine), 0, 2)));
  EXPECT_EQ(bound[1], cpu_list_text(cpu_block(cores_of(mine), 1, 2)));
  EXPECT_NE(bound[0], bound[1]);
  // The default leaves them where hvrun is.
  std::vector<std::string> free = cpus_per_rank({}, 2);
  EXPECT_EQ(free[0], cpu_list_text(mine));
  EXPECT_EQ(free[1], cpu_list_text(mine));
}

}  // namespace
}  // namespace hvrun::launcher

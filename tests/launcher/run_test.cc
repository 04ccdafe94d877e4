// hvrun running real jobs (shell commands as workers), as a user would start them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

// CPU jobs, whatever GPUs the test machine has.
RunOptions cpu_job(std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  RunOptions opts;
  opts.env["HVRUN_DEVICE"] = "cpu";
  opts.timeout = timeout;
  return opts;
}

std::string fresh_dir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/hvrun_run_test_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(HvrunRunTest, EveryRankGetsItsEnvironment) {
  std::string dir = fresh_dir("env");
  const std::string script =
      "echo \"$HVRUN_RANK $HVRUN_SIZE $HVRUN_LOCAL_RANK $HVRUN_LOCAL_SIZE $HVRUN_CROSS_RANK "
      "$HVRUN_CROSS_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $HOROVOD_RANK "
      "$HOROVOD_SIZE $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK "
      "$HOROVOD_CROSS_SIZE $HVRUN_HOST $HVRUN_DATA_ADDR $HVRUN_CACHE_CAPACITY\"; "
      "printf %s \"$HVRUN_SECRET\" > " + dir + "/secret.$HVRUN_RANK; "
      "printf %s \"$HVRUN_JOB_ID\" > " + dir + "/job.$HVRUN_RANK; "
      "printf %s \"$HVRUN_COORDINATOR_ADDR\" > " + dir + "/addr.$HVRUN_RANK";
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "-H", "localhost:4", "--verbose",
                             "--cache-capacity", "7", "sh", "-c", script},
                            cpu_job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> lines;
  for (const std::string& line : split_lines(r.out)) lines.insert(line);
  for (int k = 0; k < 3; ++k) {
    std::string rank = std::to_string(k);
    std::string expected = "[" + rank + "]<stdout>:" + rank + " 3 " + rank + " 3 0 1 " + rank +
                           " 3 " + rank + " 3 " + rank + " 3 " + rank + " 3 0 1 localhost " +
                           "127.0.0.1 7";
    EXPECT_EQ(lines.count(expected), 1u) << "missing: " << expected << "\n" << r.out;
  }
  // One secret for the whole job, 256 random bits, never printed (not even with --verbose).
  std::string secret = read_file(dir + "/secret.0");
  EXPECT_TRUE(std::regex_match(secret, std::regex("[0-9a-f]{64}"))) << secret;
  EXPECT_EQ(read_file(dir + "/secret.1"), secret);
  EXPECT_EQ(read_file(dir + "/secret.2"), secret);
  EXPECT_EQ(r.err.find(secret), std::string::npos);
  EXPECT_EQ(r.out.find(secret), std::string::npos);
  EXPECT_NE(r.err.find("HVRUN_SECRET=<hidden>"), std::string::npos) << r.err;
  std::string job = read_file(dir + "/job.0");
  EXPECT_FALSE(job.empty());
  EXPECT_EQ(read_file(dir + "/job.2"), job);
  std::string addr = read_file(dir + "/addr.0");
  EXPECT_EQ(read_file(dir + "/addr.1"), addr);
  // Single-host jobs: a unix socket in a private directory named after the job, both gone after.
  EXPECT_TRUE(std::regex_match(addr, std::regex("unix:/.*/" + job + "-[A-Za-z0-9]{6}/coordinator\\.sock")))
      << addr;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(addr.substr(5)).parent_path())) << addr;

  // Another job gets another secret; an explicit --coordinator-port means TCP on loopback.
  RunResult again = run_process(
      {bin_path("hvrun"), "-np", "1", "--coordinator-port", "0", "sh", "-c", script}, cpu_job());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(read_file(dir + "/secret.0"), secret);
  EXPECT_TRUE(std::regex_match(read_file(dir + "/addr.0"), std::regex("127\\.0\\.0\\.1:[1-9][0-9]*")))
      << read_file(dir + "/addr.0");
}

TEST(HvrunRunTest, OutputIsTaggedAndCopiedToPerRankFiles) {
  std::string dir = fresh_dir("files");
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "2", "--output-filename", dir + "/logs", "sh", "-c",
       "echo out$HVRUN_RANK; echo err$HVRUN_RANK >&2; printf 'no newline'"},
      cpu_job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> out_lines, err_lines;
  for (const auto& l : split_lines(r.out)) out_lines.insert(l);
  for (const auto& l : split_lines(r.err)) err_lines.insert(l);
  for (std::string rank : {"0", "1"}) {
    EXPECT_EQ(out_lines.count("[" + rank + "]<stdout>:out" + rank), 1u) << r.out;
    EXPECT_EQ(out_lines.count("[" + rank + "]<stdout>:no newline"), 1u) << r.out;
    EXPECT_EQ(err_lines.count("[" + rank + "]<stderr>:err" + rank), 1u) << r.err;
    // Files hold the rank's bytes exactly as written, untagged.
    EXPECT_EQ(read_file(dir + "/logs/rank." + rank + "/stdout"), "out" + rank + "\nno newline");
    EXPECT_EQ(read_file(dir + "/logs/rank." + rank + "/stderr"), "err" + rank + "\n");
  }

  RunResult untagged = run_process(
      {bin_path("hvrun"), "-np", "1", "--tag-output=false", "echo", "plain"}, cpu_job());
  ASSERT_EQ(untagged.exit_code, 0) << untagged.err;
  EXPECT_EQ(untagged.out, "plain\n");
}

TEST(HvrunRunTest, FailingRankEndsTheJobWithItsCodeAndIsNamed) {
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "3", "sh", "-c",
       "if [ \"$HVRUN_RANK\" = 1 ]; then echo 'loss is nan' >&2; exit 3; fi; exec sleep 60"},
      cpu_job());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.elapsed.count(), 6000);
  EXPECT_NE(r.err.find("rank 1 on localhost"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with code 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvrun:   loss is nan"), std::string::npos) << r.err;  // its last stderr
}

TEST(HvrunRunTest, RankKilledBySignalGives128PlusSignal) {
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "sh", "-c",
                             "if [ \"$HVRUN_RANK\" = 0 ]; then kill -SEGV $$; fi; exec sleep 60"},
                            cpu_job());
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_NE(r.err.find("rank 0 on localhost"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGSEGV"), std::string::npos) << r.err;
}

TEST(HvrunRunTest, RankExitingZeroEarlyIsNotAFailure) {
  std::string dir = fresh_dir("early");
  // Rank 1 finishes only after rank 0 has exited (it waits for rank 0's pid to disappear).
  std::string script =
      "if [ \"$HVRUN_RANK\" = 0 ]; then echo $$ > " + dir + "/pid0.tmp; mv " + dir +
      "/pid0.tmp " + dir + "/pid0; exit 0; fi; "
      "while [ ! -e " + dir + "/pid0 ]; do sleep 0.01; done; "
      "while kill -0 $(cat " + dir + "/pid0) 2>/dev/null; do sleep 0.01; done; echo finished";
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "sh", "-c", script}, cpu_job());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[1]<stdout>:finished"), std::string::npos) << r.out;
}

TEST(HvrunRunTest, CommandsWithoutTheWorkerLibraryOutliveTheStartTimeout) {
  // Nobody registers, so the registration timeout never starts: the job runs to its end.
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "--start-timeout", "0.2", "sh", "-c",
                             "sleep 0.6; echo done $HVRUN_RANK"},
                            cpu_job());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:done 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:done 1"), std::string::npos) << r.out;
}

TEST(HvrunRunTest, BadInputExitsTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"-np", "0", "true"},
      {"-H", "host:", "true"},
      {"-H", "localhost:2", "-np", "3", "true"},
      {"-H", "a:2", "-np", "3", "true"},
      {"-H", "gpu-node-7:2,gpu-node-7:1", "true"},
      {"--no-such-flag", "true"},
      {"-np", "2"},
      {},
      {"-np", "1", "hvrun-no-such-command"},
      {"-np", "1", "./no/such/path"},
  };
  for (const auto& args : cases) {
    std::vector<std::string> argv{bin_path("hvrun")};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = run_process(argv, cpu_job());
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
    auto lines = split_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << shown << "\n" << r.err;
    EXPECT_EQ(lines[0].rfind("hvrun: ", 0), 0u) << lines[0];
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // A host that ssh cannot reach: the pre-flight check names it and carries ssh's own words.
  RunResult multi = run_process({bin_path("hvrun"), "-H", "gpu-node-7.invalid:2", "true"}, cpu_job());
  EXPECT_EQ(multi.exit_code, 1) << multi.err;
  EXPECT_NE(multi.err.find("host gpu-node-7.invalid: ssh failed: ssh: Could not resolve hostname"),
            std::string::npos) << multi.err;
  RunResult missing = run_process({bin_path("hvrun"), "hvrun-no-such-command"}, cpu_job());
  EXPECT_NE(missing.err.find("hvrun-no-such-command"), std::string::npos) << missing.err;
}

TEST(HvrunRunTest, LinesOfTwoRanksNeverInterleaveOrTear) {
  const int kLines = 300, kLength = 5000, kSteps = 200;
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", bin_path("launcher_output_printer"),
                             std::to_string(kLines), std::to_string(kLength),
                             std::to_string(kSteps)},
                            cpu_job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, int> full_lines, progress_segments;
  const std::string a_line(kLength, 'a'), b_line(kLength, 'b');
  for (const std::string& line : split_lines(r.out)) {
    // A line may hold several '\r' segments, but only of one rank, each tagged.
    std::stringstream segments(line);
    std::string seg;
    int line_rank = -1;
    while (std::getline(segments, seg, '\r')) {
      if (seg.empty()) continue;
      ASSERT_TRUE(seg.rfind("[0]<stdout>:", 0) == 0 || seg.rfind("[1]<stdout>:", 0) == 0)
          << "untagged segment: " << seg.substr(0, 80);
      int rank = seg[1] - '0';
      if (line_rank == -1) line_rank = rank;
      ASSERT_EQ(rank, line_rank) << "two ranks in one line: " << line.substr(0, 200);
      std::string body = seg.substr(12);
      char letter = static_cast<char>('a' + rank);
      if (body == (rank == 0 ? a_line : b_line)) {
        ++full_lines[rank];
      } else {
        ASSERT_EQ(body.rfind(std::string(1, letter) + " progress ", 0), 0u)
            << "torn line of rank " << rank << ": " << body.substr(0, 80) << "... ("
            << body.size() << " bytes)";
        ++progress_segments[rank];
      }
    }
  }
  EXPECT_EQ(full_lines[0], kLines);
  EXPECT_EQ(full_lines[1], kLines);
  EXPECT_GE(progress_segments[0], 1);
  EXPECT_GE(progress_segments[1], 1);
  // The final state of each bar is there, whole.
  const std::string last = " progress " + std::to_string(kSteps) + "/" + std::to_string(kSteps);
  EXPECT_NE(r.out.find("[0]<stdout>:a" + last), std::string::npos);
  EXPECT_NE(r.out.find("[1]<stdout>:b" + last), std::string::npos);
}

// -x reaches every rank of a single-host job as it does on many hosts: NAME=VALUE, and NAME
// with the launch host's value; an HVRUN_* setting given this way is checked like the variable.
TEST(HvrunRunTest, MinusXReachesEveryRankOfASingleHostJob) {
  RunOptions opts = cpu_job();
  opts.env["HVRUN_TEST_FROM_HERE"] = "here";
  opts.env["FOO"] = std::nullopt;
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "-x", "FOO=bar", "-x",
                             "HVRUN_TEST_FROM_HERE", "-x", "HVRUN_CYCLE_TIME=3", "sh", "-c",
                             "echo ${FOO-unset} ${HVRUN_TEST_FROM_HERE-unset} $HVRUN_CYCLE_TIME"},
                            opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:bar here 3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:bar here 3\n"), std::string::npos) << r.out;

  RunResult bad = run_process(
      {bin_path("hvrun"), "-np", "1", "-x", "HVRUN_CYCLE_TIME=0x10", "true"}, cpu_job());
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("-x HVRUN_CYCLE_TIME"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("'0x10'"), std::string::npos) << bad.err;
}

// Untagged output is the rank's bytes exactly: binary data with "\n\r", lone '\r's and no
// line end at the end comes out identical.
TEST(HvrunRunTest, UntaggedOutputIsAByteExactPassThrough) {
  std::string dir = fresh_dir("exact");
  std::string data(200000, '\0');
  std::mt19937 random(12345);
  for (char& c : data) c = static_cast<char>(random() & 0xff);
  data.replace(1000, 6, "a\n\rb\r\n");
  data.back() = 'z';  // no line end at the end
  const std::string path = dir + "/random.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  RunResult r = run_process({bin_path("hvrun"), "-np", "1", "--tag-output=false", "cat", path},
                            cpu_job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), data.size());
  EXPECT_TRUE(r.out == data) << "the bytes differ from offset "
                             << std::mismatch(data.begin(), data.end(), r.out.begin()).first -
                                    data.begin();
}

}  // namespace
}  // namespace hvrun::test

// hvrun jobs with the timeline on: every rank's every phase lands in a file that parses, also
// when the timeline is started and stopped at run time, when a rank dies, when hvrun itself is
// SIGKILLed (the reader accepts the unfinished file) and across --max-restarts attempts.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "coordinator/telemetry/timeline_reader.h"
#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

using coordinator::telemetry::read_timeline;
using coordinator::telemetry::TimelineSummary;

const std::vector<std::string> kEveryPhase = {"submitted", "negotiated", "queued", "pack",
                                              "collective", "unpack", "done"};

class TimelineJob : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  static RunOptions job() {
    RunOptions o;
    o.env["HVRUN_DEVICE"] = "cpu";
    o.timeout = std::chrono::milliseconds(40000);
    return o;
  }

  static void expect_phases(const TimelineSummary& s, int ranks, const std::vector<std::string>& phases) {
    for (int r = 0; r < ranks; ++r) {
      auto it = s.phases.find(r);
      ASSERT_NE(it, s.phases.end()) << "no events for rank " << r;
      for (const std::string& phase : phases)
        EXPECT_GT(it->second.count(phase) ? it->second.at(phase) : 0u, 0u)
            << "rank " << r << " has no '" << phase << "'\n" << describe_timeline(s);
    }
  }

  const TempDir dir_{"timeline-job"};
};

TEST_F(TimelineJob, ThreeRanksWithGlooHaveEveryPhaseAndValidJson) {
  const std::string path = file("gloo.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--cpu-backend", "gloo",
                             "--timeline-filename", path, bin_path("timeline_worker"), "10"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->whole_file_json);
  EXPECT_FALSE(s->truncated_tail);
  expect_phases(*s, 3, kEveryPhase);
  EXPECT_GT(s->phases[3]["plan"], 0u);  // the coordinator's markers: pid = world size
  EXPECT_EQ(s->process_names[0], "rank 0 (localhost)");

  // The same verdict from the command users run.
  RunResult check = run_process({bin_path("hvrun"), "timeline-check", path, "--require-ranks", "3",
                                 "--require-phases", "submitted,negotiated,queued,pack,collective,unpack,done"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("closed, valid JSON"), std::string::npos) << check.out;
}

TEST_F(TimelineJob, DefaultSharedMemoryPlaneIsRecordedToo) {
  const std::string path = file("shm.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--timeline-filename", path,
                             bin_path("timeline_worker"), "5"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->whole_file_json);
  expect_phases(*s, 3, {"submitted", "negotiated", "queued", "collective", "done"});
}

TEST_F(TimelineJob, StartAndStopFromTheApiAtRunTime) {
  const std::string path = file("runtime.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", bin_path("timeline_worker"), "20",
                             "--start", path, "--stop", "8"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->whole_file_json);
  expect_phases(*s, 3, {"negotiated", "queued", "collective", "done"});
  EXPECT_EQ(s->phases[3]["timeline stopped"], 1u);
  // Stopped after step 8 of 20: the last steps are not in the file.
  EXPECT_LT(s->phases[0]["collective"], 20u * 3) << describe_timeline(*s);
}

TEST_F(TimelineJob, CApiStartsAndStopsTheTimelineAndMarksSteps) {
  const std::string path = file("c.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", bin_path("timeline_c_worker"), path}, job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // hvrun's end-of-job summary counts the steps every rank marked (3 each).
  EXPECT_NE((r.out + r.err).find("2 ranks, 3 steps"), std::string::npos) << r.out << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->whole_file_json);
  expect_phases(*s, 2, {"negotiated", "collective", "done"});
  EXPECT_EQ(s->phases[2]["timeline stopped"], 1u);
}

TEST_F(TimelineJob, StallWarningIsMarkedOnTheLateRanksLane) {
  const std::string path = file("stall.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--stall-check-warning-time-seconds", "0.2",
                             "--timeline-filename", path, bin_path("timeline_worker"), "2",
                             "--late-rank", "1", "--late-ms", "800"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_GE(s->phases[1]["stall"], 1u) << describe_timeline(*s);
  EXPECT_EQ(s->phases[0].count("stall"), 0u) << describe_timeline(*s);
  EXPECT_EQ(s->phases[2].count("stall"), 0u) << describe_timeline(*s);
}

TEST_F(TimelineJob, JoinsOfTheMainTrainerAreMarked) {
  const std::string path = file("join.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--timeline-filename", path,
                             bin_path("train"), "--uneven", "--epochs", "1", "--batches", "3"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->whole_file_json);
  expect_phases(*s, 3, {"join", "negotiated", "collective", "done"});
  EXPECT_GE(s->phases[3]["all joined"], 1u) << describe_timeline(*s);
}

TEST_F(TimelineJob, KilledRankLeavesAClosedFileWithTheAbort) {
  const std::string path = file("crash.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--grace-period", "2",
                             "--timeline-filename", path, bin_path("timeline_worker"), "50",
                             "--crash-rank", "1", "--crash-step", "3"},
                            job());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.timed_out);
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed) << describe_timeline(*s);
  EXPECT_TRUE(s->whole_file_json);
  EXPECT_EQ(s->phases[3]["abort"], 1u) << describe_timeline(*s);
  expect_phases(*s, 3, {"negotiated"});
}

TEST_F(TimelineJob, SigkilledHvrunLeavesAFileTheReaderAccepts) {
  const std::string path = file("killed.json");
  std::map<std::string, std::string> env{{"HVRUN_DEVICE", "cpu"}};
  HvrunProcess hvrun({"-np", "3", "--timeline-filename", path, bin_path("timeline_worker"), "forever"},
                     env);
  ASSERT_TRUE(hvrun.read_until(
      [](const std::string& out) {
        return out.find("[2]<stdout>:step 30\n") != std::string::npos &&
               out.find("[0]<stdout>:step 30\n") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << hvrun.out() << hvrun.err();
  // Wait (bounded) until every rank's reports reached the file: reports go every 0.5 s and the
  // coordinator flushes as they come.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool all_ranks = false;
  while (!all_ranks && std::chrono::steady_clock::now() < deadline) {
    auto s = read_timeline(path);
    all_ranks = s.is_ok() && s->phases.count(0) && s->phases.count(1) && s->phases.count(2) &&
                s->phases[0].count("collective") && s->phases[1].count("collective") &&
                s->phases[2].count("collective");
    if (!all_ranks) hvrun.read_until([](const std::string&) { return false; }, std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(all_ranks) << "the file never held every rank's events";
  ASSERT_EQ(::kill(hvrun.pid(), SIGKILL), 0);
  auto code = hvrun.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_FALSE(s->closed);  // nobody could close it
  expect_phases(*s, 3, {"negotiated", "queued", "collective", "done"});
  // hvrun-timeline-check agrees.
  RunResult check = run_process({bin_path("hvrun"), "timeline-check", path, "--require-ranks", "3",
                                 "--require-phases", "collective"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("not closed"), std::string::npos) << check.out;
}

TEST_F(TimelineJob, SigtermToHvrunStillClosesTheFile) {
  const std::string path = file("sigterm.json");
  std::map<std::string, std::string> env{{"HVRUN_DEVICE", "cpu"}};
  HvrunProcess hvrun({"-np", "2", "--grace-period", "2", "--timeline-filename", path,
                      bin_path("timeline_worker"), "forever"},
                     env);
  ASSERT_TRUE(hvrun.read_until(
      [](const std::string& out) { return out.find("[1]<stdout>:step 10\n") != std::string::npos; },
      std::chrono::seconds(30)))
      << hvrun.out() << hvrun.err();
  // Wait (bounded) until both ranks' first reports are in the file.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool both = false;
  while (!both && std::chrono::steady_clock::now() < deadline) {
    auto s = read_timeline(path);
    both = s.is_ok() && s->phases[0].count("collective") && s->phases[1].count("collective");
    if (!both) hvrun.read_until([](const std::string&) { return false; }, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(both) << "the file never held both ranks' events";
  ASSERT_EQ(::kill(hvrun.pid(), SIGTERM), 0);
  auto code = hvrun.wait_exit(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed) << describe_timeline(*s);
  EXPECT_TRUE(s->whole_file_json);
  expect_phases(*s, 2, {"negotiated", "collective"});
}

TEST_F(TimelineJob, EachRestartAttemptWritesItsOwnFile) {
  const std::string path = file("restart.json");
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--max-restarts", "1", "--grace-period", "2",
                             "--timeline-filename", path, bin_path("timeline_worker"), "6",
                             "--crash-rank", "2", "--crash-step", "2"},
                            job());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto first = read_timeline(path);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(first->phases[3]["abort"], 1u);
  auto second = read_timeline(file("restart.restart1.json"));
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_TRUE(second->whole_file_json);
  EXPECT_EQ(second->phases[3].count("abort"), 0u);
  expect_phases(*second, 3, {"negotiated", "collective", "done"});
}

}  // namespace
}  // namespace hvrun::test

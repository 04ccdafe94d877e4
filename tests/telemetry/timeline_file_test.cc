// The timeline file: what TimelineWriter writes parses as JSON, and the reader counts it,
// tolerating a truncated tail (a job killed mid-write) but not garbage in the middle.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "coordinator/telemetry/timeline_reader.h"
#include "coordinator/telemetry/timeline_writer.h"

namespace hvrun::coordinator::telemetry {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("hvrun-tl-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_sample(TimelineWriter& w) {
  w.name_process(0, "rank 0 (a)", 0);
  w.name_process(1, "rank 1 (b)", 1);
  w.event(0, "grad.w", "negotiated", 1000, 50, {{"waited_for_ranks", "1"}});
  w.event(0, "grad.w", "collective", 1060, 20, {{"backend", "shm"}, {"bytes", "4096"}});
  w.event(1, "grad.w", "collective", 1061, 19, {});
  w.event(1, "weird \"lane\"\n\\", "done", 1090, -1, {{"quote\"key", "tab\tvalue"}});
}

TEST(TimelineFile, WriterOutputIsValidJsonAndReaderCountsPhasesPerRank) {
  const std::string path = temp_path("valid.json");
  {
    auto w = TimelineWriter::open(path);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    write_sample(**w);
    (*w)->close();
  }
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->whole_file_json);
  EXPECT_FALSE(s->truncated_tail);
  EXPECT_EQ(s->phases[0]["negotiated"], 1u);
  EXPECT_EQ(s->phases[0]["collective"], 1u);
  EXPECT_EQ(s->phases[1]["collective"], 1u);
  EXPECT_EQ(s->phases[1]["done"], 1u);
  EXPECT_EQ(s->process_names[1], "rank 1 (b)");
  std::filesystem::remove(path);
}

// --timeline-names horovod: the phases under Horovod's activity names, the rest as they are.
TEST(TimelineFile, HorovodNamesForThePhases) {
  const std::string path = temp_path("horovod.json");
  {
    auto w = TimelineWriter::open(path, /*horovod_names=*/true);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    (*w)->name_process(0, "rank 0", 0);
    (*w)->event(0, "grad.w", "negotiated", 1000, 50, {{"op", "allreduce"}});
    (*w)->event(0, "grad.w", "queued", 1050, 5, {{"plan", "1"}});
    (*w)->event(0, "grad.w", "pack", 1055, 5, {{"backend", "nccl"}, {"op", "allreduce"}});
    (*w)->event(0, "grad.w", "collective", 1060, 20, {{"backend", "nccl"}, {"op", "allreduce"}});
    (*w)->event(0, "grad.w", "unpack", 1080, 5, {{"backend", "nccl"}, {"op", "allreduce"}});
    (*w)->event(0, "emb", "collective", 1090, 5, {{"backend", "gloo"}, {"op", "broadcast"}});
    (*w)->event(0, "emb", "done", 1095, -1, {{"status", "ok"}});
    (*w)->close();
  }
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  for (const char* name : {"NEGOTIATE_ALLREDUCE", "QUEUE", "MEMCPY_IN_FUSION_BUFFER",
                           "NCCL_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER", "GLOO_BCAST", "done"})
    EXPECT_EQ(s->phases[0][name], 1u) << name;
  EXPECT_EQ(s->phases[0]["negotiated"], 0u);
  std::filesystem::remove(path);
}

TEST(TimelineFile, TruncatedTailOfAKilledJobIsAccepted) {
  const std::string path = temp_path("truncated.json");
  std::string text;
  {
    auto w = TimelineWriter::open(path);
    ASSERT_TRUE(w.is_ok());
    write_sample(**w);
    (*w)->flush(true);
    text = read_all(path);  // what a SIGKILL leaves: no closing bracket
  }
  text.resize(text.size() - 10);  // ... and cut in the middle of its last line
  std::ofstream(path, std::ios::trunc) << text;
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_FALSE(s->closed);
  EXPECT_TRUE(s->truncated_tail);
  EXPECT_EQ(s->phases[0]["collective"], 1u);
  EXPECT_EQ(s->phases[1]["collective"], 1u);
  EXPECT_EQ(s->phases[1].count("done"), 0u);  // the cut line
  std::filesystem::remove(path);
}

TEST(TimelineFile, GarbageBeforeTheLastLineIsAnErrorNamingTheLine) {
  const std::string path = temp_path("garbage.json");
  std::ofstream(path) << "[\n{\"name\":\"a\",\"ph\":\"i\",\"pid\":0}\n,{oops\n,{\"name\":\"b\",\"ph\":\"i\",\"pid\":0}\n]\n";
  auto s = read_timeline(path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("line 3"), std::string::npos) << s.status().message();
  std::filesystem::remove(path);
}

TEST(TimelineFile, CheckCommandRequiresEveryPhaseOfEveryRank) {
  const std::string path = temp_path("check.json");
  {
    auto w = TimelineWriter::open(path);
    ASSERT_TRUE(w.is_ok());
    write_sample(**w);
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_timeline_check({path, "--require-ranks", "2", "--require-phases", "collective"}, out, err), 0)
      << err.str();
  EXPECT_EQ(run_timeline_check({path, "--require-ranks", "2", "--require-phases", "negotiated"}, out, err), 1);
  EXPECT_NE(err.str().find("rank 1 has no 'negotiated'"), std::string::npos) << err.str();
  EXPECT_EQ(run_timeline_check({}, out, err), 2);
  EXPECT_EQ(run_timeline_check({temp_path("missing.json")}, out, err), 1);
  std::filesystem::remove(path);
}

TEST(TimelineFile, UnwritablePathFailsNamingIt) {
  auto w = TimelineWriter::open("/nonexistent-dir-hvrun/t.json");
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("/nonexistent-dir-hvrun/t.json"), std::string::npos);
}

TEST(TimelineFile, RestartedAttemptsGetTheirOwnFile) {
  EXPECT_EQ(timeline_path_for_attempt("t.json", 0), "t.json");
  EXPECT_EQ(timeline_path_for_attempt("/x/t.json", 1), "/x/t.restart1.json");
  EXPECT_EQ(timeline_path_for_attempt("trace", 2), "trace.restart2");
  EXPECT_EQ(timeline_path_for_attempt("", 2), "");
}

}  // namespace
}  // namespace hvrun::coordinator::telemetry

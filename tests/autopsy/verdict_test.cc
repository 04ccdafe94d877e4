// The autopsy's verdict (autopsy/verdict.h) from job reports made by hand: the rank
// missing from the most stalled tensors, where its training thread is (Python frames first,
// else native frames outside system objects, outermost first) and the system call it sleeps in;
// a rank that did not answer by its process state; and the report files parse back.
#include "autopsy/verdict.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <tuple>

#include "autopsy/report_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun {
namespace {

v1::AutopsyJobReport two_ranks_rank_1_behind() {
  v1::AutopsyJobReport report;
  report.set_job_id("hvrun-test");
  report.set_trigger("stall warning");
  report.set_deadline_seconds(2);
  for (int r = 0; r < 2; ++r) {
    v1::AutopsyRankEntry* e = report.add_ranks();
    e->set_rank(r);
    e->set_host(r == 0 ? "hostA" : "hostB");
    e->set_pid(100 + r);
  }
  for (const char* name : {"grad.fc1", "grad.fc2", "grad.out"}) {
    v1::AutopsyStall* s = report.add_stalls();
    s->set_name(name);
    s->set_waited_seconds(12.5);
    s->add_missing_ranks(1);
    s->add_submitted_ranks(0);
    report.mutable_ranks(1)->add_missing_tensors(name);
  }
  return report;
}

v1::AutopsyThread* add_thread(v1::AutopsyReport* report, int64_t tid, const char* letter,
                              const char* syscall) {
  v1::AutopsyThread* t = report->add_threads();
  t->set_tid(tid);
  t->set_state(letter);
  t->set_syscall(syscall);
  return t;
}

void add_native(v1::AutopsyThread* t, const char* function, const char* file, int line,
                const char* object) {
  v1::AutopsyFrame* f = t->add_native_frames();
  f->set_function(function);
  f->set_file(file);
  f->set_line(line);
  f->set_object(object);
}

TEST(AutopsyVerdict, NamesThePythonLinesOfTheThreadThatSubmits) {
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  v1::AutopsyRankEntry* e = report.mutable_ranks(1);
  e->set_answered(true);
  v1::AutopsyReport* r = e->mutable_report();
  r->set_pid(101);
  add_thread(r, 101, "S", "futex");  // the main thread: not the one that trains
  v1::AutopsyThread* trainer = add_thread(r, 105, "S", "read");
  for (auto [function, file, line] : {std::tuple{"read", "/src/dataset.py", 41},
                                      std::tuple{"load_batch", "/src/train.py", 88},
                                      std::tuple{"main", "/src/train.py", 120},
                                      std::tuple{"<module>", "/src/train.py", 130}}) {
    v1::AutopsyFrame* f = trainer->add_python_frames();
    f->set_function(function);
    f->set_file(file);
    f->set_line(line);
  }
  v1::FlightRecord* last = r->add_ring();
  last->set_sequence(7);
  last->set_submitter_tid(105);
  EXPECT_EQ(autopsy_verdict(report),
            "rank 1 on hostB has not submitted 'grad.fc1' (3 tensors behind); it is in "
            "train.py:120 main -> train.py:88 load_batch -> dataset.py:41 read (sleeping in read)");
}

TEST(AutopsyVerdict, NamesNativeFramesOutsideSystemLibrariesAndHeaders) {
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  v1::AutopsyRankEntry* e = report.mutable_ranks(1);
  e->set_answered(true);
  v1::AutopsyReport* r = e->mutable_report();
  r->set_pid(101);
  v1::AutopsyThread* main_thread = add_thread(r, 101, "S", "futex");
  add_native(main_thread, "__lll_lock_wait", "", 0, "/lib/x86_64-linux-gnu/libc.so.6");
  add_native(main_thread, "std::mutex::lock()", "/usr/include/c++/12/bits/std_mutex.h", 100, "/bin/w");
  add_native(main_thread, "take_lock(int)", "/src/w.cc", 40, "/bin/w");
  add_native(main_thread, "step()", "/src/w.cc", 60, "/bin/w");
  add_native(main_thread, "main", "/src/w.cc", 90, "/bin/w");
  add_native(main_thread, "__libc_start_call_main", "", 0, "/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(autopsy_verdict(report),
            "rank 1 on hostB has not submitted 'grad.fc1' (3 tensors behind); it is in "
            "w.cc:90 main -> w.cc:60 step -> w.cc:40 take_lock (sleeping in futex)");
}

TEST(AutopsyVerdict, ARankThatDidNotAnswerIsJudgedByItsProcessState) {
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  report.mutable_ranks(0)->set_answered(true);
  v1::AutopsyProcessState* p = report.mutable_ranks(1)->mutable_process();
  p->set_state("stopped");
  p->set_state_letter("T");
  EXPECT_EQ(autopsy_verdict(report),
            "rank 1 on hostB has not submitted 'grad.fc1' (3 tensors behind); it did not answer "
            "within 2.0 s: its process (pid 101) is stopped");
  p->set_state("sleeping");
  p->set_state_letter("S");
  p->set_syscall("read");
  EXPECT_NE(autopsy_verdict(report).find("is sleeping in read"), std::string::npos);
}

TEST(AutopsyVerdict, NoStallAndEveryAnswerMeansNoRankIsBehind) {
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  report.clear_stalls();
  for (auto& e : *report.mutable_ranks()) {
    e.clear_missing_tensors();
    e.set_answered(true);
  }
  EXPECT_EQ(autopsy_verdict(report).rfind("no rank is behind", 0), 0u);
}

TEST(AutopsyVerdict, ShortWaitsWhenEveryRankAnsweredAreCollectivesInProgress) {
  // What an autopsy of a job that runs finds: tensors waiting milliseconds for their last rank.
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  for (auto& e : *report.mutable_ranks()) e.set_answered(true);
  for (auto& s : *report.mutable_stalls()) s.set_waited_seconds(0.002);
  report.mutable_stalls(1)->set_waited_seconds(0.004);
  EXPECT_EQ(autopsy_verdict(report),
            "no rank is stuck: every rank answered and the longest wait, 'grad.fc2' for rank 1, "
            "is 0.004 s (collectives in progress)");
  // A wait past that is a rank holding the others up, named as before.
  report.mutable_stalls(1)->set_waited_seconds(0.5);
  EXPECT_EQ(autopsy_verdict(report).rfind("rank 1 on hostB has not submitted 'grad.fc1'", 0), 0u)
      << autopsy_verdict(report);
  // And a rank that did not answer is named however short the waits.
  report.mutable_stalls(1)->set_waited_seconds(0.004);
  report.mutable_ranks(1)->set_answered(false);
  EXPECT_EQ(autopsy_verdict(report).rfind("rank 1 on hostB", 0), 0u) << autopsy_verdict(report);
}

TEST(AutopsyVerdict, FunctionNamesLoseTheirParameters) {
  EXPECT_EQ(function_without_parameters("read_batch(int, char*)"), "read_batch");
  EXPECT_EQ(function_without_parameters("ns::f(std::vector<int> const&) const"), "ns::f");
  EXPECT_EQ(function_without_parameters("(anonymous namespace)::g()"), "(anonymous namespace)::g");
  EXPECT_EQ(function_without_parameters("main"), "main");
}

TEST(AutopsyVerdict, TheReportFilesParseBack) {
  const test::TempDir dir("autopsy-files");
  v1::AutopsyJobReport report = two_ranks_rank_1_behind();
  report.set_unix_us(1700000000000000);
  report.set_verdict(autopsy_verdict(report));
  auto files = write_autopsy_files(report, dir.path() + "/reports");
  ASSERT_TRUE(files.is_ok()) << files.status().message();
  v1::AutopsyJobReport back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(test::read_file(files->json), &back).ok());
  EXPECT_EQ(back.SerializeAsString(), report.SerializeAsString());
  EXPECT_NE(test::read_file(files->text).find("verdict: " + report.verdict()), std::string::npos);
  auto second = write_autopsy_files(report, dir.path() + "/reports");
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE(second->json, files->json);  // the same second: a file of its own
}

}  // namespace
}  // namespace hvrun

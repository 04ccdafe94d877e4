// `hvrun agent` driven directly through its protocol (launcher/remote/agent_protocol.h), as hvrun drives
// it over ssh: it reports itself and its interfaces, runs the workers it is given, streams their
// output and exits, and kills them when its connection closes or the coordinator goes away.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/remote/agent_protocol.h"
#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

using launcher::encode_frame;
using launcher::Frame;
using launcher::FrameReader;
using launcher::join_list;
using Clock = std::chrono::steady_clock;

// The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z' zombie), '?' when gone.
char process_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return '?';
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string stat(buf, n);
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
}

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  const char state = process_state(pid);
  return state != '?' && state != 'Z';
}

class AgentProcess {
 public:
  AgentProcess() {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      std::string hvrun = bin_path("hvrun");
      ::execl(hvrun.c_str(), hvrun.c_str(), "agent", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~AgentProcess() {
    close_stdin();
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (pid_t p : workers_) ::kill(-p, SIGKILL);
  }
  void send(const std::string& bytes) {
    ASSERT_EQ(::write(to_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // The next frame, or nullopt at end of stream or after `timeout`.
  std::optional<Frame> next(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (true) {
      auto f = reader_.next();
      if (!f.is_ok()) return std::nullopt;
      if (f->has_value()) return **f;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // Frames until one of `type` arrives (returned), collecting the others.
  std::optional<Frame> until(const std::string& type, std::chrono::milliseconds timeout,
                             std::vector<Frame>* others = nullptr) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto f = next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (!f) return std::nullopt;
      if (f->type == "STARTED") workers_.push_back(static_cast<pid_t>(f->int_arg(1)));
      if (f->type == type) return f;
      if (others) others->push_back(*f);
    }
    return std::nullopt;
  }
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::usleep(20000);
    }
    return std::nullopt;
  }
  const std::vector<pid_t>& workers() const { return workers_; }

  // HELLO, interfaces, then the job: `n` workers running `script`.
  void start_job(const std::string& script, int n, const std::string& coordinator,
                 const std::vector<std::string>& extra_env = {}) {
    auto hello = until("HELLO", std::chrono::seconds(10));
    ASSERT_TRUE(hello);
    EXPECT_FALSE(hello->payload.empty());
    std::vector<Frame> ifaces;
    ASSERT_TRUE(until("IFACES_DONE", std::chrono::seconds(10), &ifaces));
    bool loopback = false;
    for (const Frame& f : ifaces)
      loopback |= f.type == "IFACE" && f.payload.find("127.0.0.1") != std::string::npos;
    EXPECT_TRUE(loopback);
    send(encode_frame("PROBE", {}, join_list({"127.0.0.1:1"})));
    auto probed = until("PROBED", std::chrono::seconds(10));
    ASSERT_TRUE(probed);
    EXPECT_EQ(probed->args.at(1), "fail");  // nothing listens on port 1
    send(encode_frame("CWD", {}, "/"));
    send(encode_frame("ARGV", {}, join_list({"/bin/sh", "-c", script})));
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> env = {"HVRUN_RANK=" + std::to_string(r), "HVRUN_SECRET=s3cret"};
      env.insert(env.end(), extra_env.begin(), extra_env.end());
      send(encode_frame("WORKER", {std::to_string(r)}, join_list(env)));
    }
    send(encode_frame("START", {}, coordinator));
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  FrameReader reader_;
  std::vector<pid_t> workers_;
};

TEST(AgentTest, RunsWorkersStreamsOutputAndReportsExits) {
  AgentProcess agent;
  agent.start_job("echo rank $HVRUN_RANK in $(pwd); echo oops >&2; exit $HVRUN_RANK", 2, "unix:/x");
  std::vector<Frame> frames;
  ASSERT_TRUE(agent.until("BYE", std::chrono::seconds(10), &frames));
  std::string out1, err0;
  std::vector<int> exits(2, -1);
  for (const Frame& f : frames) {
    if (f.type == "OUT" && f.int_arg(0) == 1 && f.int_arg(1) == 1) out1 += f.payload;
    if (f.type == "OUT" && f.int_arg(0) == 0 && f.int_arg(1) == 2) err0 += f.payload;
    if (f.type == "EXIT")
      exits.at(static_cast<size_t>(f.int_arg(0))) = static_cast<int>(f.int_arg(1));
  }
  EXPECT_EQ(out1, "rank 1 in /\n");
  EXPECT_EQ(err0, "oops\n");
  ASSERT_TRUE(WIFEXITED(exits[0]) && WIFEXITED(exits[1]));
  EXPECT_EQ(WEXITSTATUS(exits[0]), 0);
  EXPECT_EQ(WEXITSTATUS(exits[1]), 1);
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
}

// An elastic job's worker killed on an agent's host: the agent says DYING, with the status the
// exit will carry, before its EXIT (the worker's 512 MiB take the kernel a while to release).
TEST(AgentTest, AnElasticWorkersDeathIsReportedAsItBegins) {
  AgentProcess agent;
  agent.start_job("exec " + bin_path("launcher_death_watch_worker") + " 512", 1, "unix:/x",
                  {"HVRUN_ELASTIC=1"});
  auto held = agent.until("OUT", std::chrono::seconds(20));
  ASSERT_TRUE(held);
  ASSERT_EQ(held->payload, "held\n");
  ASSERT_EQ(agent.workers().size(), 1u);
  ASSERT_EQ(::kill(agent.workers()[0], SIGKILL), 0);
  std::vector<Frame> before_exit;
  auto exit = agent.until("EXIT", std::chrono::seconds(10), &before_exit);
  ASSERT_TRUE(exit);
  const Frame* dying = nullptr;
  for (const Frame& f : before_exit)
    if (f.type == "DYING") dying = &f;
  ASSERT_NE(dying, nullptr) << "no DYING frame before the EXIT";
  EXPECT_EQ(dying->int_arg(0), 0);
  const int status = static_cast<int>(dying->int_arg(1));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ(dying->int_arg(1), exit->int_arg(1));
}

// Outside an elastic job nothing gains by it: the worker is not watched, and only EXIT tells.
TEST(AgentTest, AFixedJobsWorkerIsNotWatched) {
  AgentProcess agent;
  agent.start_job("exec " + bin_path("launcher_death_watch_worker") + " 0", 1, "unix:/x");
  auto out = agent.until("OUT", std::chrono::seconds(20));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->payload, "unwatched\n");
  ASSERT_EQ(::kill(agent.workers().at(0), SIGKILL), 0);
  std::vector<Frame> before_exit;
  ASSERT_TRUE(agent.until("EXIT", std::chrono::seconds(10), &before_exit));
  for (const Frame& f : before_exit) EXPECT_NE(f.type, "DYING");
}

TEST(AgentTest, AClosedConnectionKillsTheWorkersAtOnce) {
  AgentProcess agent;
  agent.start_job("echo up; exec sleep 100", 2, "unix:/x");
  ASSERT_TRUE(agent.until("OUT", std::chrono::seconds(10)));
  ASSERT_EQ(agent.workers().size(), 2u);
  for (pid_t p : agent.workers()) EXPECT_TRUE(alive(p));
  auto t0 = Clock::now();
  agent.close_stdin();  // what a dead hvrun or a cut ssh connection looks like
  ASSERT_TRUE(agent.wait_exit(std::chrono::seconds(5)).has_value());
  for (pid_t p : agent.workers()) EXPECT_FALSE(alive(p)) << p;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

TEST(AgentTest, ForwardedSignalsReachTheWorkers) {
  AgentProcess agent;
  agent.start_job("echo up; exec sleep 100", 1, "unix:/x");
  ASSERT_TRUE(agent.until("OUT", std::chrono::seconds(10)));
  agent.send(encode_frame("SIGNAL", {std::to_string(SIGINT)}));
  auto exit = agent.until("EXIT", std::chrono::seconds(5));
  ASSERT_TRUE(exit);
  int status = static_cast<int>(exit->int_arg(1));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_TRUE(agent.until("BYE", std::chrono::seconds(5)));
}

// A stopped worker acts on the forwarded SIGTERM at once: the agent sends SIGCONT with it.
TEST(AgentTest, AStoppedWorkerEndsOnTheForwardedSignal) {
  AgentProcess agent;
  agent.start_job("echo up; kill -STOP $$; exec sleep 100", 1, "unix:/x");
  ASSERT_TRUE(agent.until("OUT", std::chrono::seconds(10)));
  ASSERT_EQ(agent.workers().size(), 1u);
  // Bounded wait until the worker shows as stopped ('T' in /proc/<pid>/stat).
  auto stopped = [&] { return process_state(agent.workers()[0]) == 'T'; };
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!stopped() && Clock::now() < deadline) ::usleep(5000);
  ASSERT_TRUE(stopped());
  agent.send(encode_frame("SIGNAL", {std::to_string(SIGTERM)}));
  auto exit = agent.until("EXIT", std::chrono::seconds(3));
  ASSERT_TRUE(exit) << "the stopped worker did not act on SIGTERM";
  int status = static_cast<int>(exit->int_arg(1));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

TEST(AgentTest, ACoordinatorThatStopsAnsweringEndsTheWorkers) {
  AgentProcess agent;
  // Nothing listens on 127.0.0.1:1: three failed checks, 2 s apart.
  agent.start_job("echo up; exec sleep 100", 1, "127.0.0.1:1");
  std::vector<Frame> frames;
  auto exit = agent.until("EXIT", std::chrono::seconds(12), &frames);
  ASSERT_TRUE(exit);
  int status = static_cast<int>(exit->int_arg(1));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  bool noted = false;
  for (const Frame& f : frames)
    noted |= f.type == "NOTE" &&
             f.payload.find("coordinator at 127.0.0.1:1 stopped answering") != std::string::npos;
  EXPECT_TRUE(noted);
}

// A worker's daemon (setsid, then orphaned by a fork whose parent exits) left its process group:
// the agent, its subreaper, ends it with the job and names it to hvrun.
TEST(AgentTest, ADaemonAWorkerDoubleForkedEndsWithTheJobAndIsNamed) {
  AgentProcess agent;
  // "daemon <pid>" once the daemon runs sleep (until its exec it is a copy of the shell).
  agent.start_job(
      "d=$(setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 & echo $!'); "
      "c=; while [ \"$c\" != sleep ]; do read -r c < /proc/$d/comm || exit 1; done; "
      "echo \"daemon $d\"",
      1, "unix:/x");
  std::vector<Frame> frames;
  ASSERT_TRUE(agent.until("BYE", std::chrono::seconds(10), &frames));
  pid_t daemon = 0;
  std::string notes;
  for (const Frame& f : frames) {
    if (f.type == "OUT" && f.payload.rfind("daemon ", 0) == 0)
      daemon = static_cast<pid_t>(std::atol(f.payload.c_str() + 7));
    if (f.type == "NOTE") notes += f.payload + "\n";
  }
  ASSERT_GT(daemon, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (alive(daemon) && Clock::now() < deadline) ::usleep(5000);
  const bool survived = alive(daemon);
  if (survived) ::kill(daemon, SIGKILL);
  EXPECT_FALSE(survived) << "the worker's daemon outlived the job";
  EXPECT_NE(notes.find("pid " + std::to_string(daemon) + " (sleep 600) from rank 0, sent SIGTERM"),
            std::string::npos)
      << notes;
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
}

}  // namespace
}  // namespace hvrun::test

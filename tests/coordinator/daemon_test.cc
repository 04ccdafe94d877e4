// The hvrun-coordinator executable: secret handling, the address line, a whole (tiny) job.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/coordinator/test_client.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace hvrun::coordinator {
namespace {

using testing::TestClient;
using testing::TestStream;

// The daemon running in the background, its stdout read line by line; killed (by pid) if the
// test leaves it running.
class Daemon {
 public:
  explicit Daemon(std::vector<std::string> args, const std::string& secret) {
    int out[2];
    int in[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(in), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    args.insert(args.begin(), hvrun::test::bin_path("hvrun-coordinator"));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (char** e = environ; *e; ++e) {
      if (std::string(*e).rfind("HVRUN_SECRET=", 0) != 0) env_text.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(in[0]);
    out_ = out[0];
    // The secret on stdin, as a launcher that keeps it off argv and the environment would.
    const std::string line = secret + "\n";
    EXPECT_EQ(write(in[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(in[1]);
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }

  // The first line of stdout, or "" after `timeout`.
  std::string first_line(std::chrono::milliseconds timeout) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return "";
  }

  // The exit code, or -1 if it did not exit within `timeout`.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      pollfd none{-1, 0, 0};
      poll(&none, 0, 20);  // a short pause between checks of a bounded wait
    }
    return -1;
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

TEST(Daemon, RunsAOneRankJobToItsCleanEnd) {
  Daemon daemon({"--world-size", "1", "--cycle-time-ms", "0.5"}, testing::kTestSecret);
  const std::string address = daemon.first_line(std::chrono::seconds(10));
  ASSERT_NE(address.find("127.0.0.1:"), std::string::npos) << address;
  TestClient client(address);
  v1::RegisterResponse registered;
  ASSERT_TRUE(client.register_worker(-1, "localhost", &registered).ok());
  EXPECT_EQ(registered.topology().size(), 1);
  EXPECT_EQ(registered.settings().at("cycle_time_ms"), "0.5");
  TestStream stream(client);
  ASSERT_TRUE(stream.hello(0));
  v1::CoordinatorMessage message;
  ASSERT_TRUE(stream.read(&message));
  v1::RequestBatch batch;
  *batch.add_requests() = testing::allreduce_request("x", {1});
  ASSERT_TRUE(stream.send(batch));
  ASSERT_TRUE(stream.read(&message));
  ASSERT_TRUE(message.has_plan());
  ASSERT_TRUE(stream.goodbye());
  EXPECT_TRUE(stream.close().ok());
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(10)), 0);
}

TEST(Daemon, RegistrationTimeoutEndsItWithAFailure) {
  Daemon daemon({"--world-size", "2", "--start-timeout", "0.3"}, testing::kTestSecret);
  const std::string address = daemon.first_line(std::chrono::seconds(10));
  ASSERT_NE(address, "");
  TestClient client(address);
  v1::RegisterResponse registered;
  grpc::Status status = client.register_worker(0, "localhost", &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(status.error_message().find("missing rank 1"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(10)), 1);
}

// Every rank registers at once (Register answers when the last one arrives).
void register_all(TestClient& client, int world_size) {
  std::vector<std::thread> workers;
  for (int r = 0; r < world_size; ++r) {
    workers.emplace_back([&client, r] {
      v1::RegisterResponse registered;
      EXPECT_TRUE(client.register_worker(r, "host" + std::to_string(r), &registered).ok());
    });
  }
  for (auto& worker : workers) worker.join();
}

// Rank 1 opens its stream, is welcomed, then drops the connection without Goodbye (as a
// killed worker does): the coordinator aborts the job naming it.
void vanish_as_rank_1(TestClient& client) {
  TestStream vanishing(client);
  ASSERT_TRUE(vanishing.hello(1));
  v1::CoordinatorMessage welcome;
  ASSERT_TRUE(vanishing.read(&welcome));
  vanishing.cancel();
  (void)vanishing.finish();
}

// Rank 0 registered but had not opened its stream when rank 1 vanished: it must hear that, not
// find the coordinator gone (which it would report as its own failure).
TEST(Daemon, ARankOpeningItsStreamAfterAnAbortHearsWhy) {
  Daemon daemon({"--world-size", "3"}, testing::kTestSecret);
  const std::string address = daemon.first_line(std::chrono::seconds(10));
  ASSERT_NE(address, "");
  TestClient client(address);
  register_all(client, 3);
  TestStream witness(client);
  ASSERT_TRUE(witness.hello(2));
  v1::CoordinatorMessage message;
  ASSERT_TRUE(witness.read(&message));
  ASSERT_TRUE(message.has_welcome());
  vanish_as_rank_1(client);
  ASSERT_TRUE(witness.read(&message));  // the job is aborted now
  ASSERT_TRUE(message.has_abort()) << message.DebugString();

  TestStream late(client);
  late.hello(0);
  ASSERT_TRUE(late.read(&message));
  ASSERT_TRUE(message.has_abort()) << message.DebugString();
  EXPECT_NE(message.abort().reason().find("rank 1 on host host1"), std::string::npos)
      << message.abort().reason();
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(10)), 1);
}

// A rank that registered and died before opening its stream holds the coordinator only briefly
// (its wait, and gRPC's grace for calls in flight at shutdown, 2 s each).
TEST(Daemon, WaitsForLateRanksOnlyBriefly) {
  Daemon daemon({"--world-size", "2"}, testing::kTestSecret);
  const std::string address = daemon.first_line(std::chrono::seconds(10));
  ASSERT_NE(address, "");
  TestClient client(address);
  register_all(client, 2);
  const auto cancelled = std::chrono::steady_clock::now();
  vanish_as_rank_1(client);
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(10)), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled, std::chrono::seconds(8));
}

TEST(Daemon, SigtermEndsItWithAFailure) {
  Daemon daemon({"--world-size", "2"}, testing::kTestSecret);
  ASSERT_NE(daemon.first_line(std::chrono::seconds(10)), "");
  kill(daemon.pid(), SIGTERM);
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(10)), 1);
}

// --exit-with-stdin: the process that started it holds its stdin; end of file ends the job.
TEST(Daemon, EndOfStdinEndsItWhenAsked) {
  hvrun::test::RunOptions options;
  options.env["HVRUN_SECRET"] = "s";
  options.timeout = std::chrono::seconds(20);
  auto result = hvrun::test::run_process(
      {hvrun::test::bin_path("hvrun-coordinator"), "--world-size", "1", "--exit-with-stdin"},
      options);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("its stdin closed"), std::string::npos) << result.err;
}

TEST(Daemon, RefusesToRunWithoutASecretOrWorldSize) {
  hvrun::test::RunOptions options;
  options.env["HVRUN_SECRET"] = std::nullopt;
  options.timeout = std::chrono::seconds(10);
  auto result = hvrun::test::run_process(
      {hvrun::test::bin_path("hvrun-coordinator"), "--world-size", "2"}, options);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("no job secret"), std::string::npos) << result.err;

  options.env["HVRUN_SECRET"] = "s";
  result = hvrun::test::run_process({hvrun::test::bin_path("hvrun-coordinator")}, options);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--world-size is required"), std::string::npos) << result.err;

  result = hvrun::test::run_process(
      {hvrun::test::bin_path("hvrun-coordinator"), "--world-size", "2", "--fusion-threshold-mb",
       "-3"},
      options);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("fusion"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace hvrun::coordinator

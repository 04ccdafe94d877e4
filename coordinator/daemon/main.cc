// hvrun-coordinator: the coordinator as its own process, for jobs another launcher starts
// (mpirun, Slurm, Kubernetes).
//
//   HVRUN_SECRET=... hvrun-coordinator --world-size 8 --listen 0.0.0.0:29500
//   echo "$SECRET" | hvrun-coordinator --world-size 8
//   hvrun-coordinator --world-size 1 --exit-with-stdin   (a single trainer's own, see
//                                                         worker_lib/runtime/private_coordinator.h)
//
// Prints the bound address as the first line of stdout, serves until the job ends (every rank
// said goodbye, an abort, or the rendezvous failed) or SIGTERM/SIGINT, and exits 0 only after a
// clean end.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "autopsy/report_files.h"
#include "autopsy/reporter.h"
#include "common/logging.h"
#include "common/setting_keys.h"
#include "common/settings.h"
#include "coordinator/metrics/metrics_server.h"
#include "coordinator/service/coordinator_server.h"

namespace {

using hvrun::Status;

constexpr const char* kUsage =
    "usage: hvrun-coordinator --world-size N [--listen ADDR] [--job-id ID] [coordinator settings]\n"
    "  The job secret comes from HVRUN_SECRET, or else from the first line of stdin (never argv).\n"
    "  --listen ADDR   host:port or unix:/path (default 127.0.0.1:<--coordinator-port>)\n"
    "  --exit-with-stdin  end the job (as SIGTERM does) once stdin reaches end of file: the\n"
    "                  process holding its other end has ended\n";

struct DaemonArgs {
  int world_size = 0;
  std::string listen;
  std::string job_id;
  bool exit_with_stdin = false;
  hvrun::Settings settings;
};

void print_help() {
  std::cout << kUsage << "Settings (flag, variable, default):\n";
  for (const auto& spec : hvrun::all_settings()) {
    if (spec.scope != "coordinator" && spec.scope != "all") continue;
    std::cout << "  " << spec.flag << "  " << spec.env << "  (default " << spec.default_value
              << ")  " << spec.description << "\n";
  }
}

hvrun::Result<DaemonArgs> parse(int argc, char** argv) {
  DaemonArgs args;
  HVRUN_RETURN_IF_ERROR(args.settings.apply_process_environment());
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&]() -> hvrun::Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) return hvrun::invalid_argument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--help" || arg == "-h") {
      print_help();
      std::exit(0);
    } else if (arg == "--world-size") {
      HVRUN_ASSIGN_OR_RETURN(std::string text, take_value());
      char* end = nullptr;
      const long n = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || n < 1 || n > 1 << 20) {
        return hvrun::invalid_argument("--world-size '" + text + "': expected a rank count >= 1");
      }
      args.world_size = static_cast<int>(n);
    } else if (arg == "--listen") {
      HVRUN_ASSIGN_OR_RETURN(args.listen, take_value());
    } else if (arg == "--exit-with-stdin") {
      args.exit_with_stdin = true;
    } else if (arg == "--job-id") {
      HVRUN_ASSIGN_OR_RETURN(args.job_id, take_value());
    } else if (const auto* spec = hvrun::find_setting_by_flag(arg);
               spec && (spec->scope == "coordinator" || spec->scope == "all")) {
      if (!has_value && spec->kind != hvrun::SettingKind::kBool) {
        HVRUN_ASSIGN_OR_RETURN(value, take_value());
        has_value = true;
      }
      HVRUN_RETURN_IF_ERROR(args.settings.apply_flag(arg, value, has_value));
    } else {
      return hvrun::invalid_argument("unknown argument '" + arg + "'\n" + kUsage);
    }
  }
  if (args.world_size == 0) return hvrun::invalid_argument(std::string("--world-size is required\n") + kUsage);
  return args;
}

// True once stdin is at end of file or hung up (nothing is ever written to it).
bool stdin_ended() {
  pollfd p{0, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

std::string this_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

// The autopsy's lines, each message in one piece (stderr is unbuffered: one write).
void write_to_stderr(std::string_view lines) { std::cerr << lines << std::flush; }

// A rank between its registration and its negotiation stream when the job was aborted hears
// why only if the coordinator still answers; a coordinator already gone would leave it with
// "connection refused", a failure of its own in the eyes of whoever gathers the ranks' ends.
// Bounded: a rank that died there never opens its stream.
void tell_late_ranks_why(hvrun::coordinator::CoordinatorServer& server) {
  constexpr auto kLinger = std::chrono::seconds(2);
  constexpr auto kPoll = std::chrono::milliseconds(20);
  const auto until = std::chrono::steady_clock::now() + kLinger;
  while (!server.registered_without_stream().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(kPoll);
}

int fail(const Status& status) {
  std::cerr << "hvrun-coordinator: " << status.message() << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGTERM/SIGINT go to a thread of ours; block them before gRPC starts its threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // our own wake-up for the signal thread at exit
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto args = parse(argc, argv);
  if (!args.is_ok()) return fail(args.status());
  if (Status s = hvrun::logging::init("coordinator", args->settings.get(hvrun::setting::kLogLevel),
                                      args->settings.get(hvrun::setting::kLogTimestamps));
      !s.is_ok()) {
    return fail(s);
  }

  auto options = hvrun::coordinator::CoordinatorOptions::from_settings(args->settings);
  options.world_size = args->world_size;
  options.job_id = args->job_id;
  if (!args->listen.empty()) options.listen_address = args->listen;
  if (const char* secret = std::getenv("HVRUN_SECRET"); secret && *secret) {
    options.secret = secret;
  } else {
    std::getline(std::cin, options.secret);
    while (!options.secret.empty() &&
           (options.secret.back() == '\r' || options.secret.back() == ' ')) {
      options.secret.pop_back();
    }
  }
  if (options.secret.empty()) {
    return fail(hvrun::invalid_argument("no job secret: set HVRUN_SECRET or write it on stdin"));
  }

  // Autopsies (stall warnings): the verdict on stderr and the report files, as hvrun gives them.
  // Ranks that registered with this machine's host name have their /proc read here.
  const hvrun::AutopsyReporting reporting{
      hvrun::autopsy_directory(args->settings.get(hvrun::setting::kAutopsyDir),
                               args->settings.get(hvrun::setting::kOutputFilename)),
      false, this_host_name(), "hvrun-coordinator"};
  auto on_event = [&reporting](const hvrun::coordinator::CoordinatorEvent& event) {
    if (event.kind == hvrun::coordinator::CoordinatorEvent::Kind::kAutopsy && event.autopsy)
      hvrun::report_autopsy(*event.autopsy, reporting, write_to_stderr);
  };
  auto server = hvrun::coordinator::CoordinatorServer::start(std::move(options), on_event);
  if (!server.is_ok()) return fail(server.status());
  std::cout << (*server)->address() << std::endl;
  // --metrics-port: Prometheus /metrics over this coordinator's telemetry (address on stderr:
  // stdout's first line stays the coordinator's address).
  std::unique_ptr<hvrun::coordinator::metrics::MetricsServer> metrics;
  if (const int64_t port = args->settings.get(hvrun::setting::kMetricsPort); port >= 0) {
    auto started = hvrun::coordinator::metrics::MetricsServer::start(
        {args->settings.get(hvrun::setting::kMetricsAddress), static_cast<int>(port)},
        [&server] { return (*server)->telemetry(); });
    if (!started.is_ok()) return fail(started.status());
    metrics = std::move(started).value();
    std::cerr << "hvrun-coordinator: metrics at " << metrics->url() << std::endl;
  }

  std::thread signal_waiter([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number == SIGUSR1) return;
    (*server)->abort(std::string("the coordinator received ") +
                     (signal_number == SIGTERM ? "SIGTERM" : "SIGINT"));
  });
  std::optional<Status> end;
  while (!(end = (*server)->wait_for_end(std::chrono::seconds(1)))) {
    if (args->exit_with_stdin && stdin_ended())
      (*server)->abort("the process that started the coordinator ended (its stdin closed)");
  }
  if (!end->is_ok()) tell_late_ranks_why(**server);
  if (metrics) metrics->stop();
  (*server)->shutdown();
  pthread_kill(signal_waiter.native_handle(), SIGUSR1);
  signal_waiter.join();
  if (!end->is_ok()) {
    std::cerr << "hvrun-coordinator: job ended: " << end->to_string() << std::endl;
    return 1;
  }
  return 0;
}

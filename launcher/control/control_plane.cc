#include "launcher/control/control_plane.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <grpc/grpc.h>
#include <spdlog/spdlog.h>

#include "common/setting_keys.h"
#include "coordinator/service/coordinator_server.h"
#include "launcher/elastic/elastic_options.h"

namespace hvrun::launcher {
namespace {

using coordinator::CoordinatorEvent;
using coordinator::CoordinatorOptions;
using coordinator::CoordinatorServer;

// Single-host jobs talk to the coordinator over a unix socket (a gRPC round trip is ~30% cheaper
// than over loopback TCP, and starting a job measurably faster); a --coordinator-port given
// explicitly, or a temporary directory whose path is too long for a socket, means TCP.
bool wants_unix_socket(const Settings& settings) {
  return settings.source(setting::kCoordinatorPort.name) == SettingSource::kDefault;
}

std::string tcp_address(const Settings& settings) {
  return "127.0.0.1:" + std::to_string(settings.get(setting::kCoordinatorPort));
}

// A fresh directory only this user can enter, for the socket: whatever the umask, no other
// user can reach the coordinator (the job secret is the second lock, not the only one).
// Empty when none can be made.
std::string make_private_directory(const std::string& job_id) {
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  std::string path = ((ec ? std::filesystem::path("/tmp") : tmp) / (job_id + "-XXXXXX")).string();
  if (::mkdtemp(path.data()) == nullptr) return "";
  if (::chmod(path.c_str(), 0700) != 0) {  // mkdtemp's 0700 is masked by the umask
    ::rmdir(path.c_str());
    return "";
  }
  return path;
}

constexpr const char* kSocketName = "/coordinator.sock";

// Binding a socket there is what gRPC will do; a failure now means the TCP fallback later.
bool can_bind_unix_socket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  if (ok) ::unlink(path.c_str());
  return ok;
}

// gRPC shuts its library down (joining its threads) when its last object goes, 10-20 ms at the
// end of every hvrun run; hvrun exits right after, so one reference is kept for the process.
void keep_grpc_initialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

class InProcessCoordinator final : public ControlPlane {
 public:
  explicit InProcessCoordinator(std::unique_ptr<CoordinatorServer> server)
      : server_(std::move(server)) {}
  ~InProcessCoordinator() override { shutdown(); }
  std::string address() const override { return server_->address(); }
  void abort(const std::string& reason, int rank, const std::string& host) override {
    server_->abort(reason, rank, host);
  }
  std::optional<CoordinatorVerdict> verdict() const override {
    auto cause = server_->abort_cause();
    if (!cause) return std::nullopt;
    return CoordinatorVerdict{cause->reason, cause->rank, cause->host, cause->at_registration,
                              cause->departure};
  }
  void worker_exited(int rank, const std::string& how) override {
    server_->worker_exited(rank, how);
  }
  bool request_autopsy(const std::string& trigger) override {
    return server_->request_autopsy(trigger);
  }
  void change_membership(std::vector<coordinator::PlannedRank> plan, const std::string& reason,
                         const std::string& host) override {
    server_->change_membership(std::move(plan), reason, -1, host);
  }
  void add_slots(std::vector<coordinator::PlannedRank> plan, int added) override {
    server_->add_slots(std::move(plan), added);
  }
  std::vector<coordinator::PlannedRank> formed_membership() const override {
    return server_->formed_membership();
  }
  void shutdown() override {
    server_->shutdown();
    const std::string address = server_->address();
    if (address.rfind("unix:", 0) == 0) {  // gone already is fine
      const std::filesystem::path socket = address.substr(5);
      ::unlink(socket.c_str());
      ::rmdir(socket.parent_path().c_str());  // the private directory made for it
    }
  }
  coordinator::telemetry::JobTelemetry telemetry() const override { return server_->telemetry(); }
  std::optional<Status> final_status() override {
    return server_->wait_for_end(std::chrono::milliseconds(0));
  }

 private:
  std::unique_ptr<CoordinatorServer> server_;
};

}  // namespace

std::string predictable_unix_address(const Settings& settings, const std::string& job_id) {
  if (!wants_unix_socket(settings)) return "";
  const std::string dir = make_private_directory(job_id);
  if (dir.empty()) return "";
  const std::string path = dir + kSocketName;
  if (!can_bind_unix_socket(path)) {
    ::rmdir(dir.c_str());
    return "";
  }
  return "unix:" + path;
}

CoordinatorHooks coordinator_hooks(const std::unique_ptr<ControlPlane>* control,
                                   std::mutex* mutex, EarlyExits* early) {
  auto lock = [mutex] {
    return mutex != nullptr ? std::unique_lock<std::mutex>(*mutex) : std::unique_lock<std::mutex>();
  };
  CoordinatorHooks hooks;
  hooks.abort = [control, lock](const std::string& reason, int rank, const std::string& host) {
    auto held = lock();
    if (*control) (*control)->abort(reason, rank, host);
  };
  hooks.worker_exited = [control, lock, early](int rank, const std::string& how) {
    auto held = lock();
    if (*control) {
      (*control)->worker_exited(rank, how);
    } else if (early != nullptr) {
      early->exits.emplace_back(rank, how);
    }
  };
  hooks.verdict = [control, lock]() -> std::optional<CoordinatorVerdict> {
    auto held = lock();
    return *control ? (*control)->verdict() : std::nullopt;
  };
  hooks.request_autopsy = [control, lock](const std::string& trigger) {
    auto held = lock();
    return *control && (*control)->request_autopsy(trigger);
  };
  return hooks;
}

ElasticHooks elastic_hooks(const std::unique_ptr<ControlPlane>* control, std::mutex* mutex) {
  auto lock = [mutex] {
    return mutex != nullptr ? std::unique_lock<std::mutex>(*mutex) : std::unique_lock<std::mutex>();
  };
  auto to_plan = [](const std::vector<ElasticSlot>& slots) {
    std::vector<coordinator::PlannedRank> ranks;
    for (const ElasticSlot& s : slots) ranks.push_back({s.host, s.local_rank});
    return ranks;
  };
  ElasticHooks hooks;
  hooks.change_membership = [control, lock, to_plan](const std::vector<ElasticSlot>& slots,
                                                     const std::string& reason,
                                                     const std::string& host) {
    auto held = lock();
    if (*control) (*control)->change_membership(to_plan(slots), reason, host);
  };
  hooks.add_slots = [control, lock, to_plan](const std::vector<ElasticSlot>& slots, int added) {
    auto held = lock();
    if (*control) (*control)->add_slots(to_plan(slots), added);
  };
  hooks.straggler = [control, lock]() -> std::optional<coordinator::telemetry::StragglerEvidence> {
    auto held = lock();
    if (!*control) return std::nullopt;
    return (*control)->telemetry().replaceable_straggler;
  };
  hooks.formed = [control, lock] {
    auto held = lock();
    std::vector<ElasticSlot> slots;
    if (*control)
      for (const coordinator::PlannedRank& r : (*control)->formed_membership())
        slots.push_back({r.host, r.local_rank});
    return slots;
  };
  return hooks;
}

void replay_early_exits(ControlPlane& control, EarlyExits& early) {
  for (const auto& [rank, how] : early.exits) control.worker_exited(rank, how);
  early.exits.clear();
}

Result<std::unique_ptr<ControlPlane>> start_control_plane(const Settings& settings,
                                                          const JobPlan& plan,
                                                          const std::string& secret,
                                                          const std::string& job_id,
                                                          ControlPlaneEvents events,
                                                          const std::string& listen_on) {
  keep_grpc_initialized();
  CoordinatorOptions options = CoordinatorOptions::from_settings(settings);
  options.listen_address = listen_on.empty() ? tcp_address(settings) : listen_on;
  options.secret = secret;
  options.job_id = job_id;
  options.world_size = plan.size;
  for (const RankSlot& slot : plan.ranks)
    options.plan.push_back(coordinator::PlannedRank{slot.host, slot.local_rank});
  HVRUN_ASSIGN_OR_RETURN(ElasticOptions elastic, elastic_options(settings, plan.size));
  options.elastic = elastic.enabled;
  options.elastic_timeout = elastic.timeout;

  auto on_event = [events = std::move(events), elastic = options.elastic](const CoordinatorEvent& event) {
    switch (event.kind) {
      case CoordinatorEvent::Kind::kRegistrationComplete:
        if (events.on_note) events.on_note("coordinator: " + event.message);
        break;
      case CoordinatorEvent::Kind::kRegistrationFailed:
        if (events.on_failure) events.on_failure("registration failed: " + event.message, event.rank);
        break;
      case CoordinatorEvent::Kind::kAborted:
        if (events.on_failure) events.on_failure("job aborted: " + event.message, event.rank);
        break;
      case CoordinatorEvent::Kind::kJobFinished:
        if (events.on_note) events.on_note("coordinator: " + event.message);
        break;
      case CoordinatorEvent::Kind::kWorkerLost:
        // Elastic jobs go on without it: the launcher decides from the process's exit.
        if (elastic) {
          if (events.on_note) events.on_note("coordinator: worker lost: " + event.message);
        } else if (events.on_failure) {
          events.on_failure("worker lost: " + event.message, event.rank);
        }
        break;
      case CoordinatorEvent::Kind::kMembershipEnded:
        if (events.on_note) events.on_note("coordinator: membership ended: " + event.message);
        break;
      case CoordinatorEvent::Kind::kAutopsy:
        if (events.on_autopsy && event.autopsy) events.on_autopsy(event.autopsy);
        break;
    }
  };
  const std::string first_choice = options.listen_address;
  auto server = CoordinatorServer::start(options, on_event);
  if (!server.is_ok() && first_choice.rfind("unix:", 0) == 0) {
    ::rmdir(std::filesystem::path(first_choice.substr(5)).parent_path().c_str());
    // A temporary directory hvrun cannot create sockets in: loopback TCP works as well.
    spdlog::warn("coordinator: {} ({}); using loopback TCP instead", server.status().message(),
                 first_choice);
    options.listen_address = "127.0.0.1:0";
    server = CoordinatorServer::start(options, on_event);
  }
  if (!server.is_ok()) return server.status();
  return std::unique_ptr<ControlPlane>(
      std::make_unique<InProcessCoordinator>(std::move(server).value()));
}

}  // namespace hvrun::launcher

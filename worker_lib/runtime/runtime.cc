#include "worker_lib/runtime/runtime.h"

#include <unistd.h>

#include <filesystem>
#include <utility>

#include "common/logging.h"
#include "worker_lib/config_environment.h"
#include "worker_lib/runtime/private_coordinator.h"
#include "worker_lib/runtime/runtime_builder.h"

namespace hvrun::detail {
namespace {

std::string local_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Runtime::Runtime(const Config& config) : parts_(config) {
  if (parts_.config.host.empty()) parts_.config.host = local_host_name();
}

Runtime::~Runtime() { (void)shutdown(); }

Result<std::unique_ptr<Runtime>> Runtime::start(const Config& given) {
  HVRUN_RETURN_IF_ERROR(logging::init("worker", given.log_level, given.log_timestamps));
  for (const std::string& note : given.environment_notes) SPDLOG_INFO("{}", note);
  if (!given.environment_warning.empty()) SPDLOG_WARN("{}", given.environment_warning);
  Config config = given;
  const bool own_coordinator = config.private_coordinator && config.coordinator_address.empty();
  if (config.coordinator_address.empty() && !own_coordinator)
    return invalid_argument("hvrun worker: no coordinator address (HVRUN_COORDINATOR_ADDR); "
                            "start the trainer with hvrun, or fill Config::coordinator_address");
  // A single process has one job of its own: a second init() while it lives is refused as for
  // any job, before a second coordinator is started.
  HVRUN_ASSIGN_OR_RETURN(auto claim, LiveWorkerClaim::claim(own_coordinator
                                                                ? "its own (no launcher)"
                                                                : config.coordinator_address));
  std::unique_ptr<PrivateCoordinator> own;
  if (own_coordinator) {
    HVRUN_ASSIGN_OR_RETURN(own, PrivateCoordinator::start(executable_search_path(),
                                                          config.secret, config.start_timeout));
    config.coordinator_address = own->address();
    config.secret = own->secret();
    config.job_id.clear();  // the private coordinator names its own job
    config.requested_rank = 0;
    config.local_rank = 0;
    SPDLOG_INFO("no launcher (HVRUN_COORDINATOR_ADDR is not set): running as a single process, "
                "a job of size 1, with a coordinator of its own ({}, pid {})",
                own->program(), own->pid());
  }
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  RuntimeParts& parts = runtime->parts_;
  parts.private_coordinator = std::move(own);
  parts.claim = std::move(claim);
  // A build that fails part way leaves the runtime to its destructor: shutdown() then stops
  // nothing (no thread was started) and releases the claim.
  HVRUN_RETURN_IF_ERROR(RuntimeBuilder(parts, runtime->lifecycle_).build());
  runtime->lifecycle_.start();
  parts.claim->set_identity(parts.topology.rank, parts.job_id);
  return runtime;
}

Status Runtime::send_timeline_control(const std::string& filename) {
  {
    std::lock_guard<std::mutex> lock(parts_.state.mutex);
    if (parts_.state.terminal) return *parts_.state.terminal;
  }
  if (!parts_.stream) return failed_precondition("hvrun worker is not connected to a coordinator");
  v1::WorkerMessage message;
  message.mutable_timeline()->set_filename(filename);
  if (!parts_.stream->write(message))
    return unavailable("rank " + std::to_string(parts_.topology.rank) +
                       ": could not reach the coordinator to start/stop the timeline (the "
                       "negotiation stream is closed)");
  return Status::ok();
}

Status Runtime::start_timeline(const std::string& path) {
  if (path.empty())
    return invalid_argument("start_timeline: empty file name; give the JSON file to write");
  // The coordinator writes the file: make a relative name mean this worker's directory (the
  // same place on a single-host job; on a multi-host job, a path on the launch host).
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return send_timeline_control(error ? path : absolute.string());
}

Status Runtime::stop_timeline() { return send_timeline_control(""); }

Result<ProcessSetMembers> Runtime::process_set_of_mine(const ProcessSet& set,
                                                       const std::string& op_text) const {
  if (set.id < 0)
    return invalid_argument(op_text + ": process set id " + std::to_string(set.id) + " is negative");
  std::optional<ProcessSetMembers> members = parts_.process_sets->members(static_cast<uint32_t>(set.id));
  if (!members)
    return invalid_argument(op_text + ": there is no process set " + std::to_string(set.id) +
                            " (add_process_set returns the ids; a removed set's id is gone)");
  if (parts_.process_sets->removing(static_cast<uint32_t>(set.id)))
    return invalid_argument(op_text + ": process set " + std::to_string(set.id) +
                            " is being removed (this rank called remove_process_set)");
  if (!members->includes_me())
    return invalid_argument(op_text + ": rank " + std::to_string(parts_.topology.rank) +
                            " is not in process set " + std::to_string(set.id) + " (ranks " +
                            members->ranks_text() +
                            "); only its members submit its collectives");
  return *members;
}

}  // namespace hvrun::detail

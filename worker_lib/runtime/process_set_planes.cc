#include "worker_lib/runtime/process_set_planes.h"

#include <algorithm>

#include "common/logging.h"
#include "worker_lib/backends/nccl/host_plane/host_device_plane.h"
#include "worker_lib/runtime/cpu_backend_factory.h"

namespace hvrun::detail {

std::string ProcessSetMembers::ranks_text() const {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

ProcessSetPlanes::ProcessSetPlanes(Job job) : job_(std::move(job)) {}
ProcessSetPlanes::~ProcessSetPlanes() = default;

std::optional<ProcessSetMembers> ProcessSetPlanes::members(uint32_t id) const {
  if (id == 0) {
    ProcessSetMembers everyone{std::vector<int>(static_cast<size_t>(job_.size)), job_.rank};
    for (int r = 0; r < job_.size; ++r) everyone.ranks[static_cast<size_t>(r)] = r;
    return everyone;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  return it->second->members;
}

std::vector<uint32_t> ProcessSetPlanes::ids() const {
  std::vector<uint32_t> ids{0};
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, set] : sets_) ids.push_back(id);
  return ids;
}

bool ProcessSetPlanes::takes_part_in(const v1::Plan& plan) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const v1::Response& response : plan.responses()) {
    // An error (a departed rank's, a mismatch, a duplicate) moves nothing: every rank fails its
    // handles on its own (plan_runner.cc), so no peer waits for this rank there.
    if (!response.error().empty() || response.error_ranks_size() > 0) continue;
    if (response.process_set_id() == 0) return true;
    auto it = sets_.find(response.process_set_id());
    if (it != sets_.end() && it->second->members.includes_me()) return true;
  }
  return false;
}

Result<std::unique_ptr<ProcessSetPlanes::Set>> ProcessSetPlanes::connect(uint32_t id,
                                                                        ProcessSetMembers members) {
  auto set = std::make_unique<Set>();
  set->members = std::move(members);
  if (!set->members.includes_me()) return set;
  const Config& config = *job_.config;
  const std::string tag = "ps" + std::to_string(id);
  set->store = std::make_unique<PrefixedStore>(*job_.store, tag + "/");
  CpuBackendContext context{.rank = set->members.position,
                            .hosts = {},
                            .job_id = job_.job_id + "-" + tag,
                            .data_address = config.data_address,
                            .connect_timeout = config.start_timeout,
                            .op_timeout = config.op_timeout,
                            .round_agreement = false};  // a set's collectives are planned
  for (int r : set->members.ranks) context.hosts.push_back(job_.hosts[static_cast<size_t>(r)]);
  CpuBackendConfig settings = config.cpu_backend;
  if (job_.gloo_only) settings.backend = "gloo";
  auto plane = make_cpu_backend(context, settings, *set->store);
  if (!plane.is_ok())
    return plane.status().with_context("process set " + std::to_string(id) +
                                       ": connecting its CPU data plane");
  set->backend = std::move(plane.value().backend);
  set->executor = std::make_unique<PlanExecutor>(*set->backend, set->members.position,
                                                 set->members.size());
  set->executor->set_failure_explainer(job_.explain_failure);
  set->executor->set_flight_recorder(job_.recorder);
  auto gpu = std::make_unique<GpuExecutor>(GpuJob{.rank = set->members.position,
                                                  .size = set->members.size(),
                                                  .local_rank = job_.local_rank,
                                                  .host = job_.hosts[static_cast<size_t>(job_.rank)],
                                                  .op_timeout = config.op_timeout,
                                                  .setup_timeout = config.start_timeout,
                                                  .store = set->store.get(),
                                                  .allocator = config.device_allocator,
                                                  .plane_factory = cuda::device_plane_factory(config.device_plane)});
  set->gpu = gpu.get();
  set->executor->set_gpu_executor(std::move(gpu), /*asynchronous=*/false);
  if (job_.observer) {
    std::string name = set->members.size() == 1 ? "local" : set->backend->name();
    set->executor->set_phase_observer(job_.observer, name.substr(0, name.find('(')));
  }
  return set;
}

Status ProcessSetPlanes::add(uint32_t id, std::vector<int> ranks) {
  ProcessSetMembers members;
  members.ranks = std::move(ranks);
  auto me = std::find(members.ranks.begin(), members.ranks.end(), job_.rank);
  if (me != members.ranks.end()) members.position = static_cast<int>(me - members.ranks.begin());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return aborted("process set " + std::to_string(id) + " not made: " + *aborted_);
  }
  HVRUN_ASSIGN_OR_RETURN(std::unique_ptr<Set> set, connect(id, std::move(members)));
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_ && set->executor) set->executor->abort(*aborted_);
  if (set->gpu && allocator_) set->gpu->set_device_allocator(allocator_);
  sets_[id] = std::move(set);
  SPDLOG_DEBUG("process set {} added", id);
  return Status::ok();
}

void ProcessSetPlanes::remove(uint32_t id) {
  std::unique_ptr<Set> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sets_.find(id);
    if (it == sets_.end()) return;
    gone = std::move(it->second);
    sets_.erase(it);
  }
  // Destroyed outside the lock: tearing a Gloo context down may wait on its peers' sockets.
  SPDLOG_DEBUG("process set {} removed", id);
}

PlanExecutor* ProcessSetPlanes::executor(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second->executor.get();
}

void ProcessSetPlanes::set_removing(uint32_t id, bool removing) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = sets_.find(id); it != sets_.end()) it->second->removing = removing;
}

bool ProcessSetPlanes::removing(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  return it != sets_.end() && it->second->removing;
}

void ProcessSetPlanes::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) aborted_ = reason;
  for (auto& [id, set] : sets_)
    if (set->executor) set->executor->abort(reason);
}

void ProcessSetPlanes::set_device_allocator(DeviceAllocator allocator) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocator_ = allocator;
  for (auto& [id, set] : sets_)
    if (set->gpu) set->gpu->set_device_allocator(allocator);
}

}  // namespace hvrun::detail

#include "worker_lib/backends/nccl/gpu_executor.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <utility>

#include "common/logging.h"
#include "worker_lib/backends/nccl/nccl_errors.h"
#include "worker_lib/backends/nccl/plugin_loader.h"
#include "worker_lib/backends/nccl/segment_table.h"
#include "worker_lib/execution/response_shape.h"

namespace hvrun::detail {
namespace {

constexpr const char* kErrorPrefix = "error:";
constexpr const char* kIdPrefix = "id:";
constexpr const char* kUniqueIdKey = "nccl/unique_id";
constexpr const char* kRebuildKey = "nccl/rebuild";  // rank 0's how and why, for the log line

std::string gpu_key(int rank) { return "nccl/gpu/" + std::to_string(rank); }

bool is_floating(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// "allreduce of 'a', 'b' and 3 more". A round the ranks agreed on carries no names in its
// response (agreement/cached_rounds.h): this rank's own entries name the tensors then.
std::string describe(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  std::string names;
  for (int i = 0; i < r.tensors_size() && i < 3; ++i) {
    const auto& entry = e[static_cast<size_t>(i)];
    const std::string& name = r.tensors(i).name().empty() && entry ? entry->name() : r.tensors(i).name();
    names += (i ? ", '" : "'") + name + "'";
  }
  if (r.tensors_size() > 3) names += " and " + std::to_string(r.tensors_size() - 3) + " more";
  std::string op = v1::CollectiveOp_Name(r.op());
  if (op.rfind("COLLECTIVE_OP_", 0) == 0) op = op.substr(14);
  std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::tolower(c); });
  return op + " of " + names;
}

// The distinct caller streams of a response's entries (a joined rank has none).
std::vector<void*> streams_of(const std::vector<std::shared_ptr<PendingOp>>& e) {
  std::vector<void*> streams;
  for (const auto& op : e)
    if (op && std::find(streams.begin(), streams.end(), op->stream) == streams.end())
      streams.push_back(op->stream);
  return streams;
}

}  // namespace

GpuExecutor::GpuExecutor(GpuJob job) : job_(std::move(job)), allocator_(job_.allocator) {
  if (job_.plugin_candidates.empty()) job_.plugin_candidates = cuda::default_plugin_candidates();
  if (!job_.elastic) return;
  // The last membership's communicator, if this process was in it and could keep it.
  if (auto carried = take_carried_communicator()) {
    why_not_carried_ = carried->why_not;
    if (carried->plane) {
      lineage_ = carried->lineage;
      plane_ = std::move(carried->plane);
    }
  }
}

GpuExecutor::~GpuExecutor() = default;

void GpuExecutor::carry_communicator_over() {
  // Responses still on the GPU finish (or fail with the membership change) before the plane
  // is revoked and parked.
  completions_.drain();
  std::lock_guard<std::mutex> call(call_mutex_);
  std::unique_ptr<cuda::DevicePlane> plane;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!job_.elastic || !membership_changed_ || carried_over_) return;
    carried_over_ = true;
    // abort() from another thread finds no plane from here on.
    plane = std::move(plane_);
  }
  // The next membership's executor stages its own tables; these would only hold its memory.
  if (plane) fusions_.release_all(*plane);
  // The survivors' next executor may shrink this communicator. One that set nothing up (no
  // CUDA tensor in this membership) passes on what it was given, if anything.
  CarriedCommunicator carried{.why_not = why_not_carried_};
  if (plane && !lineage_.tag.empty()) {
    Status support = plane->shrink_support();
    Status revoked = support.is_ok() ? plane->revoke_communicator() : support;
    if (revoked.is_ok()) {
      carried.plane = std::move(plane);
      carried.lineage = lineage_;
    } else {
      carried.why_not = revoked.message();
    }
  }
  carry_communicator(std::move(carried));
}

void GpuExecutor::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!abort_reason_) abort_reason_ = reason;
  if (plane_) plane_->abort(reason);
}

void GpuExecutor::membership_changed(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    membership_changed_ = true;
  }
  abort(reason);
}

void GpuExecutor::set_device_allocator(DeviceAllocator allocator) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocator_ = std::move(allocator);
}

int GpuExecutor::contributors(const v1::Response& r) const {
  return r.contributing_ranks() > 0 ? r.contributing_ranks() : job_.size;
}

Result<int> GpuExecutor::local_rank_gpu() {
  HVRUN_ASSIGN_OR_RETURN(int count, plane_->device_count());
  // hvrun's rule (docs/ARCHITECTURE.md): local rank k uses GPU k; with one visible GPU
  // (--gpu-pinning=visible-devices) that one.
  if (job_.local_rank < count) return std::max(job_.local_rank, 0);
  if (count == 1) return 0;
  return failed_precondition("rank " + std::to_string(job_.rank) + " (local rank " +
                             std::to_string(job_.local_rank) + " on host " + job_.host + ") sees " +
                             std::to_string(count) + " GPUs: local rank k uses GPU k, so start at "
                             "most " + std::to_string(count) + " ranks on this host");
}

Status GpuExecutor::check_devices(const std::vector<std::shared_ptr<PendingOp>>& e) const {
  for (const auto& op : e) {
    if (!op || op->device.index == ordinal_) continue;
    return invalid_argument("tensor '" + op->name() + "' is on cuda:" +
                            std::to_string(op->device.index) + " but rank " +
                            std::to_string(job_.rank) + "'s GPU data plane runs on cuda:" +
                            std::to_string(ordinal_) + " (its first CUDA tensor's GPU): one GPU "
                            "per rank; move the tensor to that GPU");
  }
  return Status::ok();
}

Status GpuExecutor::ensure_ready(const std::vector<std::shared_ptr<PendingOp>>& e) {
  if (setup_failure_) return *setup_failure_;
  // Once set up, a later NCCL failure stays with the plane (every call fails with it).
  if (ready_) return check_devices(e);
  int ordinal = -1;
  for (const auto& op : e)
    if (op) {
      ordinal = op->device.index;
      break;
    }
  Status s = set_up(ordinal);
  if (!s.is_ok()) {
    setup_failure_ = s;
    // Tell the other ranks, who would otherwise wait for this rank's key (rank 0) or for rank
    // 0's answer (the others) until the timeout.
    if (job_.store) {
      (void)job_.store->set(gpu_key(job_.rank), kErrorPrefix + s.message());
      if (job_.rank == 0 && !answered_)
        (void)job_.store->set(kUniqueIdKey, std::string(kErrorPrefix) +
                                                "rank 0 could not set up its GPU data plane: " +
                                                s.message());
    }
    return s;
  }
  ready_ = true;
  return check_devices(e);
}

cuda::PluginContext GpuExecutor::plugin_context() const {
  return {.rank = job_.rank,
          .size = job_.size,
          .local_rank = job_.local_rank,
          .host = job_.host,
          .op_timeout = job_.op_timeout,
          .elastic = job_.elastic};
}

Result<std::unique_ptr<cuda::DevicePlane>> GpuExecutor::make_plane() {
  // Another plane (the host plane) is made where the plugin would be loaded: everything after
  // this is the same code for both.
  return job_.plane_factory ? job_.plane_factory(plugin_context())
                            : cuda::load_device_plane(plugin_context(), job_.plugin_candidates);
}

void GpuExecutor::install_plane(std::unique_ptr<cuda::DevicePlane> plane) {
  std::unique_ptr<cuda::DevicePlane> old;
  std::lock_guard<std::mutex> lock(mutex_);
  if (plane_) fusions_.release_all(*plane_);  // its tables are the old plane's
  old = std::exchange(plane_, std::move(plane));
  if (plane_ && abort_reason_) plane_->abort(*abort_reason_);
}

Status GpuExecutor::set_up(int ordinal) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_reason_) return aborted("job aborted: " + *abort_reason_);
  }
  // A plane carried over an elastic reset is used until rank 0 says whether it is shrunk.
  if (!plane_) {
    HVRUN_ASSIGN_OR_RETURN(auto plane, make_plane());
    install_plane(std::move(plane));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    plane_thread_ = std::this_thread::get_id();
  }
  if (ordinal < 0) {
    HVRUN_ASSIGN_OR_RETURN(ordinal, local_rank_gpu());
  }
  HVRUN_RETURN_IF_ERROR(plane_->use_device(ordinal));
  ordinal_ = ordinal;
  HVRUN_ASSIGN_OR_RETURN(std::string bus_id, plane_->pci_bus_id(ordinal));
  HVRUN_ASSIGN_OR_RETURN(Rebuild rebuild, agree_on_rebuild(bus_id, ordinal));
  HVRUN_RETURN_IF_ERROR(make_communicator(rebuild, ordinal));
  SPDLOG_INFO("NCCL {} communicator ready on {} ({} ranks), made by {}; {}", plane_->nccl_version(),
              plane_->device_description(), job_.size, rebuild.how, plane_->features());
  return Status::ok();
}

Result<GpuExecutor::Rebuild> GpuExecutor::agree_on_rebuild(const std::string& bus_id, int ordinal) {
  // One GPU per rank, checked before NCCL (which would only say "Duplicate GPU detected"), and
  // how the communicator is made: every rank posts its GPU and the communicator it holds, rank 0
  // alone reads them all and answers with a unique id, a shrink, or what went wrong, which
  // every other rank reads. O(N) keys in all, not N per rank.
  if (job_.store == nullptr) return internal_error("GPU data plane without a key-value store");
  // "host, PCI bus id, ordinal", then what this rank holds, when it holds anything or says why not.
  const std::string held = held_text(lineage_, why_not_carried_);
  HVRUN_RETURN_IF_ERROR(job_.store->set(gpu_key(job_.rank), job_.host + "\t" + bus_id + "\t" + std::to_string(ordinal) +
                                                                (held.empty() ? "" : "\t" + held)));
  if (job_.rank == 0) return answer_as_rank_0();
  auto got = job_.store->get({kUniqueIdKey}, job_.setup_timeout);
  if (!got.is_ok())
    return got.status().with_context("rank " + std::to_string(job_.rank) +
                                     " waiting for rank 0's NCCL unique id");
  const std::string& answer = got->at(0);
  if (answer.rfind(kErrorPrefix, 0) == 0)
    return failed_precondition(answer.substr(std::string(kErrorPrefix).size()));
  Rebuild rebuild;
  if (answer.rfind(kIdPrefix, 0) == 0) {
    rebuild.id = answer.substr(std::string(kIdPrefix).size());
  } else {
    rebuild.shrink = parse_shrink_answer(answer);
    if (!rebuild.shrink) return internal_error("rank 0's NCCL unique id is malformed (protocol error)");
  }
  // Posted by rank 0 before its answer.
  auto how = job_.store->get({kRebuildKey}, job_.setup_timeout);
  if (!how.is_ok()) return how.status().with_context("rank " + std::to_string(job_.rank) + " reading rank 0's choice");
  rebuild.how = how->at(0);
  return rebuild;
}

Result<GpuExecutor::Rebuild> GpuExecutor::answer_as_rank_0() {
  std::vector<std::string> keys;
  for (int r = 0; r < job_.size; ++r) keys.push_back(gpu_key(r));
  auto values = job_.store->get(keys, job_.setup_timeout);
  if (!values.is_ok())
    return values.status().with_context("rank 0 waiting for every rank's GPU (NCCL set-up)");
  // What rank 0 finds wrong with the others goes to them as it is (it names the rank).
  auto answer_failure = [&](Status failed) {
    answered_ = true;
    (void)job_.store->set(kUniqueIdKey, kErrorPrefix + failed.message());
    return failed;
  };
  std::vector<cuda::GpuOfRank> gpus;
  std::vector<std::string> held;
  for (int r = 0; r < job_.size; ++r) {
    const std::string& v = (*values)[static_cast<size_t>(r)];
    if (v.rfind(kErrorPrefix, 0) == 0)
      return answer_failure(failed_precondition(
          "rank " + std::to_string(r) + " could not set up its GPU data plane: " +
          v.substr(std::string(kErrorPrefix).size())));
    std::istringstream in(v);
    cuda::GpuOfRank g;
    std::string ordinal_text;
    std::getline(in, g.host, '\t');
    std::getline(in, g.bus_id, '\t');
    std::getline(in, ordinal_text, '\t');
    g.ordinal = std::atoi(ordinal_text.c_str());
    gpus.push_back(std::move(g));
    held.emplace_back();
    std::getline(in, held.back());
  }
  if (Status one_each = cuda::check_one_gpu_per_rank(gpus); !one_each.is_ok())
    return answer_failure(std::move(one_each));
  RebuildChoice choice = choose_rebuild(held);
  Rebuild rebuild{.how = choice.how};
  std::string answer;
  if (choice.shrink) {
    rebuild.shrink = choice.excluded;
    answer = shrink_answer(choice.excluded);
  } else {
    HVRUN_RETURN_IF_ERROR(replace_carried_plane(ordinal_));  // the unique id comes from the new one
    HVRUN_ASSIGN_OR_RETURN(rebuild.id, plane_->make_unique_id());
    answer = kIdPrefix + rebuild.id;
  }
  HVRUN_RETURN_IF_ERROR(job_.store->set(kRebuildKey, rebuild.how));
  HVRUN_RETURN_IF_ERROR(job_.store->set(kUniqueIdKey, answer));
  answered_ = true;
  return rebuild;
}

Status GpuExecutor::make_communicator(const Rebuild& rebuild, int ordinal) {
  if (rebuild.shrink) {
    if (lineage_.tag.empty())
      return internal_error("rank 0 chose to shrink the communicator, but rank " + std::to_string(job_.rank) +
                            " holds none (protocol error)");
    HVRUN_RETURN_IF_ERROR(plane_->shrink_communicator(*rebuild.shrink, plugin_context()));
    lineage_ = {.tag = lineage_tag_of_shrink(lineage_.tag, *rebuild.shrink), .rank = job_.rank, .size = job_.size};
    return Status::ok();
  }
  HVRUN_RETURN_IF_ERROR(replace_carried_plane(ordinal));  // rank 0's was replaced already
  HVRUN_RETURN_IF_ERROR(plane_->init_communicator(rebuild.id));
  lineage_ = {.tag = lineage_tag_of_init(rebuild.id), .rank = job_.rank, .size = job_.size};
  return Status::ok();
}

Status GpuExecutor::replace_carried_plane(int ordinal) {
  if (lineage_.tag.empty()) return Status::ok();  // a plane of this membership already
  HVRUN_ASSIGN_OR_RETURN(auto plane, make_plane());
  install_plane(std::move(plane));  // the carried one, revoked, goes here
  lineage_ = {};
  return plane_->use_device(ordinal);
}

Status GpuExecutor::on_plane_device(const std::function<Status()>& queue_work) {
  if (!ready_ || std::this_thread::get_id() == plane_thread_) return queue_work();
  // A thread about to wait runs an agreed round itself (device_plane.h): the GPU is made
  // current for the call, and the thread's own device (a framework's choice) comes back after.
  HVRUN_ASSIGN_OR_RETURN(int previous, plane_->current_device());
  if (previous == ordinal_) return queue_work();
  HVRUN_RETURN_IF_ERROR(plane_->set_current_device(ordinal_));
  Status status = queue_work();
  Status back = plane_->set_current_device(previous);
  return status.is_ok() ? back : status;
}

Status GpuExecutor::execute(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  std::lock_guard<std::mutex> call(call_mutex_);
  return on_plane_device([&]() -> Status {
    HVRUN_RETURN_IF_ERROR(run(r, e));
    return plane_->synchronize(describe(r, e));
  });
}

void GpuExecutor::execute_then(const v1::Response& r, const ResponseEntries& e,
                               std::function<void(Status)> finish) {
  uint64_t token = 0;
  cuda::DevicePlane* plane = nullptr;
  Status queued;
  {
    std::lock_guard<std::mutex> call(call_mutex_);
    queued = on_plane_device([&]() -> Status {
      HVRUN_RETURN_IF_ERROR(run(r, e));
      // Recorded with the GPU current: the token's event belongs to the plane's device.
      HVRUN_ASSIGN_OR_RETURN(token, plane_->record_completion());
      plane = plane_.get();
      return Status::ok();
    });
  }
  if (!queued.is_ok()) {
    finish(std::move(queued));
    return;
  }
  completions_.track({.plane = plane,
                      .token = token,
                      .what = describe(r, e),
                      .queued_at = std::chrono::steady_clock::now(),
                      .op_timeout = job_.op_timeout,
                      .finish = std::move(finish)});
}

void GpuExecutor::take_failure(const std::string& what) {
  std::lock_guard<std::mutex> call(call_mutex_);
  if (!plane_) return;
  // The plane answers with the failure its poll saw, aborting (or, in an elastic job,
  // revoking) the communicator on the way, so the peers learn of it now.
  (void)on_plane_device([&] { return plane_->synchronize(what); });
}

Status GpuExecutor::run(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  HVRUN_RETURN_IF_ERROR(ensure_ready(e));
  switch (r.op()) {
    case v1::COLLECTIVE_OP_ALLREDUCE: return allreduce(r, e);
    case v1::COLLECTIVE_OP_REDUCESCATTER: return reducescatter(r, e);
    case v1::COLLECTIVE_OP_ALLGATHER: return allgather(r, e);
    case v1::COLLECTIVE_OP_BROADCAST: return broadcast(r, e);
    case v1::COLLECTIVE_OP_ALLTOALL: return alltoall(r, e);
    default:
      return internal_error("GPU data plane asked to run " + v1::CollectiveOp_Name(r.op()) +
                            " (protocol error)");
  }
}

Result<std::shared_ptr<void>> GpuExecutor::allocate(const PendingOp& op, size_t bytes) {
  DeviceAllocator allocator;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    allocator = allocator_;
  }
  if (!allocator) return plane_->allocate_output(bytes, op.stream);
  std::shared_ptr<void> memory = allocator(op.device, bytes, op.stream);
  if (!memory && bytes > 0)
    return resource_exhausted("tensor '" + op.name() + "': the device allocator returned no memory "
                              "for " + std::to_string(bytes) + " bytes on cuda:" +
                              std::to_string(op.device.index));
  return memory;
}

Status GpuExecutor::wait_for_callers(const std::vector<std::shared_ptr<PendingOp>>& e) {
  for (void* stream : streams_of(e)) HVRUN_RETURN_IF_ERROR(plane_->wait_for(stream));
  return Status::ok();
}

Status GpuExecutor::release(const std::vector<std::shared_ptr<PendingOp>>& e) {
  for (void* stream : streams_of(e)) HVRUN_RETURN_IF_ERROR(plane_->release_to(stream));
  return Status::ok();
}

Status GpuExecutor::reduce_fused(const v1::Response& r,
                                 const std::vector<std::shared_ptr<PendingOp>>& e,
                                 std::span<void* const> outputs, std::span<const uint64_t> counts,
                                 std::span<const uint64_t> first,
                                 const cuda::SegmentTransform& unpack) {
  auto dtype = static_cast<DataType>(r.dtype());
  auto op = static_cast<ReduceOp>(r.reduce_op());
  cuda::FusionTensors& tensors = fusion_tensors_;
  tensors.clear();
  tensors.dtype = dtype;
  for (int i = 0; i < r.tensors_size(); ++i) {
    uint64_t n = static_cast<uint64_t>(num_elements(shape_of(r.tensors(i))));
    const auto& entry = e[static_cast<size_t>(i)];
    if (entry && static_cast<uint64_t>(num_elements(entry->shape)) != n)
      return internal_error("tensor '" + entry->name() + "': coordinator's shape does not match "
                            "this rank's (protocol error)");
    tensors.counts.push_back(n);
    tensors.sources.push_back(entry ? entry->input : nullptr);
  }
  tensors.destinations.assign(outputs.begin(), outputs.end());
  tensors.unpack_counts.assign(counts.begin(), counts.end());
  tensors.first.assign(first.begin(), first.end());
  HVRUN_ASSIGN_OR_RETURN(const cuda::StagedFusion* staged, fusions_.get(*plane_, tensors));
  double prescale = r.prescale() == 0 ? 1.0 : r.prescale();
  HVRUN_RETURN_IF_ERROR(plane_->copy_staged(staged->pack, {.dtype = dtype, .scale = prescale, .neutral_op = op}));
  bool average = op == ReduceOp::kAverage && is_floating(dtype) && contributors(r) == job_.size;
  ReduceOp wire = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  if (staged->layout.total > 0)
    HVRUN_RETURN_IF_ERROR(plane_->allreduce(staged->fusion, staged->fusion, staged->layout.total,
                                            dtype, wire, average));
  return plane_->copy_staged(staged->unpack, unpack);
}

Status GpuExecutor::allreduce(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  auto op = static_cast<ReduceOp>(r.reduce_op());
  double prescale = r.prescale() == 0 ? 1.0 : r.prescale();
  double postscale = r.postscale() == 0 ? 1.0 : r.postscale();
  bool average = op == ReduceOp::kAverage && is_floating(dtype) && contributors(r) == job_.size;
  int64_t divisor = op == ReduceOp::kAverage && !average ? contributors(r) : 1;
  cuda::SegmentTransform unpack{.dtype = dtype, .scale = postscale, .divisor = divisor};
  HVRUN_RETURN_IF_ERROR(wait_for_callers(e));

  if (r.tensors_size() == 1 && e[0] && prescale == 1.0) {
    // A lone tensor needs no fusion buffer: NCCL reduces from input into output directly.
    PendingOp& entry = *e[0];
    uint64_t n = static_cast<uint64_t>(num_elements(entry.shape));
    if (static_cast<int64_t>(n) != num_elements(shape_of(r.tensors(0))))
      return internal_error("tensor '" + entry.name() + "': coordinator's shape does not match "
                            "this rank's (protocol error)");
    if (n > 0) {
      HVRUN_RETURN_IF_ERROR(plane_->allreduce(entry.input, entry.output, n, dtype,
                                              op == ReduceOp::kAverage ? ReduceOp::kSum : op, average));
      if (divisor > 1 || postscale != 1.0) {
        cuda::Segment in_place{entry.output, entry.output, n};
        HVRUN_RETURN_IF_ERROR(plane_->copy_segments({&in_place, 1}, unpack));
      }
    }
    return release(e);
  }

  std::vector<void*> outputs;
  std::vector<uint64_t> counts;
  for (int i = 0; i < r.tensors_size(); ++i) {
    const auto& entry = e[static_cast<size_t>(i)];
    outputs.push_back(entry ? entry->output : nullptr);
    counts.push_back(static_cast<uint64_t>(num_elements(shape_of(r.tensors(i)))));
  }
  HVRUN_RETURN_IF_ERROR(reduce_fused(r, e, outputs, counts, {}, unpack));
  return release(e);
}

Status GpuExecutor::reducescatter(const v1::Response& r,
                                  const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  auto op = static_cast<ReduceOp>(r.reduce_op());
  const size_t esize = dtype_size(dtype);
  double postscale = r.postscale() == 0 ? 1.0 : r.postscale();
  bool average = op == ReduceOp::kAverage && is_floating(dtype) && contributors(r) == job_.size;
  int64_t divisor = op == ReduceOp::kAverage && !average ? contributors(r) : 1;

  // Outputs first: their stream-ordered allocation must precede the internal stream's wait.
  std::vector<void*> outputs;
  std::vector<uint64_t> counts, first;
  for (int i = 0; i < r.tensors_size(); ++i) {
    const auto& entry = e[static_cast<size_t>(i)];
    outputs.push_back(nullptr);
    counts.push_back(0);
    first.push_back(0);
    if (!entry) continue;
    const std::vector<int64_t>& shape = entry->shape;
    int64_t dim0 = shape.at(0), row = trailing_elements(shape);
    int64_t base = dim0 / job_.size, extra = dim0 % job_.size;
    int64_t rows = base + (job_.rank < extra ? 1 : 0);
    int64_t first_row = job_.rank * base + std::min<int64_t>(job_.rank, extra);
    OwnedTensor& out = entry->handle->output;
    out.dtype = dtype;
    out.shape = shape;
    out.shape[0] = rows;
    out.device = entry->device;
    out.stream = entry->stream;
    HVRUN_ASSIGN_OR_RETURN(out.device_memory, allocate(*entry, static_cast<size_t>(rows * row) * esize));
    outputs.back() = out.device_memory.get();
    counts.back() = static_cast<uint64_t>(rows * row);
    first.back() = static_cast<uint64_t>(first_row * row);
  }
  HVRUN_RETURN_IF_ERROR(wait_for_callers(e));
  HVRUN_RETURN_IF_ERROR(reduce_fused(r, e, outputs, counts, first,
                                     {.dtype = dtype, .scale = postscale, .divisor = divisor}));
  return release(e);
}

Status GpuExecutor::allgather(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const size_t esize = dtype_size(dtype);
  const int count = r.tensors_size();
  std::vector<std::vector<int64_t>> first_dims(static_cast<size_t>(count));
  std::vector<size_t> row_bytes(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto& t = r.tensors(i);
    if (t.first_dims_size() != job_.size)
      return internal_error("allgather '" + t.name() + "': response has " +
                            std::to_string(t.first_dims_size()) + " first_dims for " +
                            std::to_string(job_.size) + " ranks (protocol error)");
    first_dims[static_cast<size_t>(i)].assign(t.first_dims().begin(), t.first_dims().end());
    const auto& entry = e[static_cast<size_t>(i)];
    row_bytes[static_cast<size_t>(i)] =
        static_cast<size_t>(trailing_elements(entry ? entry->shape : shape_of(t))) * esize;
  }
  cuda::AllgatherLayout layout = cuda::allgather_layout(first_dims, row_bytes, job_.size);

  std::vector<void*> outputs;
  std::vector<const void*> sources;
  for (int i = 0; i < count; ++i) {
    const auto& entry = e[static_cast<size_t>(i)];
    outputs.push_back(nullptr);
    sources.push_back(entry ? entry->input : nullptr);
    if (!entry) continue;
    OwnedTensor& out = entry->handle->output;
    out.dtype = dtype;
    out.shape = entry->shape;
    out.shape[0] = std::accumulate(first_dims[static_cast<size_t>(i)].begin(),
                                   first_dims[static_cast<size_t>(i)].end(), int64_t{0});
    out.device = entry->device;
    out.stream = entry->stream;
    HVRUN_ASSIGN_OR_RETURN(out.device_memory,
                           allocate(*entry, static_cast<size_t>(out.shape[0]) * row_bytes[static_cast<size_t>(i)]));
    outputs.back() = out.device_memory.get();
  }
  HVRUN_RETURN_IF_ERROR(wait_for_callers(e));

  // A lone tensor is gathered straight into its output (the layouts coincide); several go
  // through the fusion buffer and are unpacked in one launch.
  const bool direct = count == 1 && outputs[0] != nullptr;
  void* buffer = outputs.empty() ? nullptr : outputs[0];
  if (!direct) {
    HVRUN_ASSIGN_OR_RETURN(buffer, plane_->fusion_buffer(std::max<size_t>(layout.total_bytes, 1)));
  }
  cuda::SegmentTransform copy{.dtype = dtype};
  HVRUN_RETURN_IF_ERROR(plane_->copy_segments(
      cuda::allgather_pack_segments(sources, first_dims, row_bytes, layout, job_.rank, buffer, esize), copy));
  if (layout.total_bytes > 0)
    HVRUN_RETURN_IF_ERROR(plane_->allgatherv(buffer, layout.block_offset, layout.block_bytes));
  if (!direct)
    HVRUN_RETURN_IF_ERROR(plane_->copy_segments(
        cuda::allgather_unpack_segments(outputs, first_dims, row_bytes, layout, buffer, esize), copy));
  return release(e);
}

Status GpuExecutor::broadcast(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const auto& entry = e.at(0);
  size_t bytes = static_cast<size_t>(num_elements(entry ? entry->shape : shape_of(r.tensors(0)))) *
                 dtype_size(dtype);
  HVRUN_RETURN_IF_ERROR(wait_for_callers(e));
  if (bytes > 0) {
    void* out = nullptr;
    const void* in = nullptr;
    if (entry) {
      out = entry->output;
      in = job_.rank == r.root_rank() ? entry->input : entry->output;
    } else {
      HVRUN_ASSIGN_OR_RETURN(out, plane_->scratch_buffer(bytes));
      in = out;
    }
    HVRUN_RETURN_IF_ERROR(plane_->broadcast(in, out, bytes, r.root_rank()));
  }
  return release(e);
}

Status GpuExecutor::alltoall(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const auto& entry = e.at(0);
  const auto& t = r.tensors(0);
  const int n = job_.size;
  if (t.splits_matrix_size() != n * n)
    return internal_error("alltoall '" + t.name() + "': splits_matrix has " +
                          std::to_string(t.splits_matrix_size()) + " entries, expected " +
                          std::to_string(n * n) + " (protocol error)");
  std::vector<int64_t> shape = entry ? entry->shape : shape_of(t);
  size_t row = static_cast<size_t>(trailing_elements(shape)) * dtype_size(dtype);
  std::vector<size_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<int64_t> recv_rows(static_cast<size_t>(n));
  int64_t total_rows = 0;
  for (int k = 0; k < n; ++k) {
    send[static_cast<size_t>(k)] = static_cast<size_t>(t.splits_matrix(job_.rank * n + k)) * row;
    recv_rows[static_cast<size_t>(k)] = t.splits_matrix(k * n + job_.rank);
    recv[static_cast<size_t>(k)] = static_cast<size_t>(recv_rows[static_cast<size_t>(k)]) * row;
    total_rows += recv_rows[static_cast<size_t>(k)];
  }
  size_t send_total = std::accumulate(send.begin(), send.end(), size_t{0});
  size_t recv_total = static_cast<size_t>(total_rows) * row;
  void* output = nullptr;
  const void* input = nullptr;
  if (entry) {
    OwnedTensor& out = entry->handle->output;
    out.dtype = dtype;
    out.shape = shape.empty() ? std::vector<int64_t>{0} : shape;
    out.shape[0] = total_rows;
    out.device = entry->device;
    out.stream = entry->stream;
    HVRUN_ASSIGN_OR_RETURN(out.device_memory, allocate(*entry, recv_total));
    output = out.device_memory.get();
    input = entry->input;
    entry->handle->received_splits = recv_rows;
  } else {
    // A joined rank sends zeros (normally no rows) and receives into the fusion buffer.
    HVRUN_ASSIGN_OR_RETURN(void* scratch, plane_->scratch_buffer(std::max<size_t>(send_total, 1)));
    if (send_total) HVRUN_RETURN_IF_ERROR(plane_->zero_bytes(scratch, send_total));
    input = scratch;
    HVRUN_ASSIGN_OR_RETURN(output, plane_->fusion_buffer(std::max<size_t>(recv_total, 1)));
  }
  HVRUN_RETURN_IF_ERROR(wait_for_callers(e));
  HVRUN_RETURN_IF_ERROR(plane_->alltoallv(input, send, output, recv));
  return release(e);
}

}  // namespace hvrun::detail

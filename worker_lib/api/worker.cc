// hvrun::Worker: argument checks, then hand-off to the runtime's background thread.
#include <algorithm>
#include <numeric>

#include "common/build_info.h"
#include "hvrun/build_config.h"
#include "hvrun/hvrun.h"
#include "worker_lib/api/op_deadlines.h"
#include "worker_lib/backends/nccl/nccl_errors.h"
#include "worker_lib/handle_state.h"
#include "proto/collective_op_name.h"
#include "worker_lib/runtime/runtime.h"

namespace hvrun {
namespace {

using detail::HandleState;
using detail::PendingOp;

Status check_tensor(int rank, const std::string& name, const void* data, DataType dtype,
                    const std::vector<int64_t>& shape, bool needs_rows) {
  if (Status s = validate_tensor_name(name); !s.is_ok())
    return s.with_context("rank " + std::to_string(rank) + ": collective refused");
  if (!is_valid_dtype(static_cast<int>(dtype)))
    return invalid_argument("tensor '" + name + "': unknown dtype " +
                            std::to_string(static_cast<int>(dtype)));
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("tensor '" + name + "': negative dimension in shape");
  if (needs_rows && shape.empty())
    return invalid_argument("tensor '" + name + "': needs at least one dimension (rows)");
  if (data == nullptr && num_elements(shape) > 0)
    return invalid_argument("tensor '" + name + "': null data for a non-empty tensor");
  return Status::ok();
}

std::shared_ptr<PendingOp> make_op(const std::string& name, v1::CollectiveOp op, DataType dtype,
                                   std::vector<int64_t> shape) {
  auto p = PendingOp::named(name);
  p->op = op;
  p->dtype = dtype;
  p->shape = std::move(shape);
  return p;
}

std::string device_text(const Device& d) {
  return d.is_cuda() ? "cuda:" + std::to_string(d.index) : std::string(device_type_name(d.type));
}

// A CUDA tensor needs a GPU ordinal and a build with the NCCL data plane; input and output of
// one collective live on the same device.
// `config` says whether CUDA tensors can run here: a CUDA build, or the host device plane (which
// runs the GPU executor over host memory, in any build).
Status check_device(const Config& config, const std::string& name, const Device& device,
                    const Device* output = nullptr) {
  if (output && !(*output == device))
    return invalid_argument("tensor '" + name + "': input on " + device_text(device) +
                            " but output on " + device_text(*output) +
                            "; both must be on one device");
  if (device.type != DeviceType::kCpu && device.type != DeviceType::kCuda)
    return invalid_argument("tensor '" + name + "': unknown device type " +
                            std::to_string(static_cast<int>(device.type)));
  if (!device.is_cuda()) return Status::ok();
  if (device.index < 0)
    return invalid_argument("tensor '" + name + "': CUDA tensor without a device ordinal "
                            "(Device::cuda(ordinal), ordinal >= 0)");
  if (!build_info().have_cuda && config.device_plane != "host")
    return detail::cuda::cuda_not_built_status(name);
  return Status::ok();
}

// NCCL has no 16-bit integer type, so a CUDA int16 tensor cannot be reduced (Horovod refuses
// it too); the operations that only move bytes carry it as they carry any dtype.
Status check_reducible(const std::string& name, DataType dtype, const Device& device) {
  if (dtype == DataType::kInt16 && device.is_cuda())
    return invalid_argument("tensor '" + name + "': int16 CUDA tensors cannot be reduced (NCCL "
                            "has no 16-bit integer type); reduce an int32 copy, or the tensor "
                            "on the CPU");
  return Status::ok();
}

void place(PendingOp& op, const Device& device, void* stream) {
  op.device = device;
  op.stream = device.is_cuda() ? stream : nullptr;
}

// What an allreduce-like op reduces with: the reduce op and its scale factors.
void set_reduction(PendingOp& op, const AllreduceOptions& options) {
  op.reduce_op = options.op;
  op.prescale = options.prescale;
  op.postscale = options.postscale;
}

Handle failed(const std::string& name, Status status) {
  return Handle(HandleState::failed(name, std::move(status)));
}

// "allreduce 'grad'": how refusals name the call.
std::string call_text(v1::CollectiveOp op, const std::string& name) {
  return std::string(collective_op_name(op)) + " '" + name + "'";
}

// The members of the set `op` runs on, when this rank may submit there (it exists here and
// this rank is in it); marks the op with the set. The global set is the common case: no lookup.
Result<detail::ProcessSetMembers> put_on_set(const detail::Runtime& runtime, PendingOp& op,
                                             ProcessSet set) {
  if (set.id == 0) return detail::ProcessSetMembers{{}, runtime.topology().rank};
  HVRUN_ASSIGN_OR_RETURN(auto members,
                         runtime.process_set_of_mine(set, call_text(op.op, op.name())));
  op.process_set = static_cast<uint32_t>(set.id);
  return members;
}

// Why an allreduce (async or blocking) is refused, or ok. `input`: a ConstTensorView, or the
// output's own TensorView in place (no copy of its shape).
template <typename InputView>
Status check_allreduce(const Config& config, int rank, const std::string& name,
                       const InputView& input,
                       const TensorView& output, const AllreduceOptions& options) {
  if (Status s = check_tensor(rank, name, input.data, input.dtype, input.shape, false); !s.is_ok())
    return s;
  if (input.dtype != output.dtype || input.shape != output.shape)
    return invalid_argument("allreduce '" + name + "': input and output differ in dtype or shape");
  if (output.data == nullptr && output.elements() > 0)
    return invalid_argument("allreduce '" + name + "': null output");
  if (!is_valid_reduce_op(static_cast<int>(options.op)))
    return invalid_argument("allreduce '" + name + "': unknown reduce op");
  if (Status s = check_device(config, name, input.device, &output.device); !s.is_ok()) return s;
  return check_reducible(name, input.dtype, input.device);
}

// A checked allreduce's fields into `op` (new, or reset for reuse: only its name is kept).
template <typename InputView>
void fill_allreduce(PendingOp& op, const InputView& input, const TensorView& output,
                    const AllreduceOptions& options) {
  op.op = v1::COLLECTIVE_OP_ALLREDUCE;
  op.dtype = input.dtype;
  op.shape.assign(input.shape.begin(), input.shape.end());
  place(op, input.device, input.stream);
  set_reduction(op, options);
  op.input = input.data;
  op.output = output.data;
}

}  // namespace

// The project version CMake configured (project(hvrun VERSION ...)), as build_info() has it.
const char* version() { return HVRUN_VERSION_STRING; }

Result<std::unique_ptr<Worker>> Worker::init() {
  HVRUN_ASSIGN_OR_RETURN(Config config, Config::from_environment());
  return init(config);
}

Result<std::unique_ptr<Worker>> Worker::init(const Config& config) {
  HVRUN_ASSIGN_OR_RETURN(auto runtime, detail::Runtime::start(config));
  return std::unique_ptr<Worker>(new Worker(std::move(runtime)));
}

Worker::Worker(std::unique_ptr<detail::Runtime> runtime)
    : runtime_(std::move(runtime)),
      deadlines_(std::make_unique<detail::OpDeadlines>(
          [runtime = runtime_.get()](const std::string& reason) { runtime->abort(reason); })) {}

Handle Worker::watched(Handle handle, std::chrono::milliseconds timeout, const char* op) {
  if (timeout.count() > 0)
    deadlines_->watch(handle, timeout,
                      "rank " + std::to_string(rank()) + ": " + op + " '" + handle.name() + "'");
  return handle;
}

Worker::~Worker() { (void)shutdown(); }

Status Worker::shutdown() { return runtime_->shutdown(); }
Status Worker::shutdown_with_failure(const std::string& reason) {
  return runtime_->shutdown(reason.empty() ? std::string("(no reason given)") : reason);
}
void Worker::abort(const std::string& reason) { runtime_->abort(reason); }
void Worker::mark_step() { runtime_->mark_step(); }
void Worker::mark_phase(std::string_view name) { runtime_->mark_phase(name); }

bool Worker::hosts_updated() const { return runtime_->hosts_updated(); }
Status Worker::start_timeline(const std::string& path) { return runtime_->start_timeline(path); }
Status Worker::stop_timeline() { return runtime_->stop_timeline(); }
void mark_step() { detail::telemetry::mark_step_everywhere(); }
void mark_phase(std::string_view name) { detail::telemetry::mark_phase_everywhere(name); }
const Topology& Worker::topology() const { return runtime_->topology(); }
const std::string& Worker::job_id() const { return runtime_->job_id(); }
const std::vector<std::string>& Worker::rank_hosts() const { return runtime_->rank_hosts(); }

namespace {
template <typename InputView>
Handle submit_allreduce(detail::Runtime& runtime, const std::string& name, const InputView& input,
                        const TensorView& output, const AllreduceOptions& options) {
  if (Status s = check_allreduce(runtime.config(), runtime.topology().rank, name, input, output,
                                options);
      !s.is_ok())
    return failed(name, s);
  auto fill = [&](PendingOp& op) { fill_allreduce(op, input, output, options); };
  // The global set's allreduces, a training step's, reuse their name's last op.
  if (options.process_set.id == 0) return runtime.submit_reusing(name, fill);
  auto op = PendingOp::named(name);
  fill(*op);
  if (auto set = put_on_set(runtime, *op, options.process_set); !set.is_ok())
    return failed(name, set.status());
  return runtime.submit(std::move(op));
}
}  // namespace

Handle Worker::allreduce_async(const std::string& name, ConstTensorView input, TensorView output,
                               const AllreduceOptions& options) {
  return watched(submit_allreduce(*runtime_, name, input, output, options), options.timeout,
                 "allreduce");
}

Handle Worker::allreduce_async(const std::string& name, TensorView inout,
                               const AllreduceOptions& options) {
  return watched(submit_allreduce(*runtime_, name, inout, inout, options), options.timeout,
                 "allreduce");
}

std::vector<Handle> Worker::grouped_allreduce_async(std::span<const std::string> names,
                                                    std::span<const TensorView> tensors,
                                                    const AllreduceOptions& options) {
  std::vector<Handle> handles;
  if (names.size() != tensors.size()) {
    for (const auto& n : names)
      handles.push_back(failed(n, invalid_argument("grouped allreduce: " +
                                                   std::to_string(names.size()) + " names for " +
                                                   std::to_string(tensors.size()) + " tensors")));
    return handles;
  }
  // One bad member fails the whole group before anything is sent: the coordinator would
  // otherwise wait for the missing member forever.
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorView& t = tensors[i];
    Status s = check_tensor(rank(), names[i], t.data, t.dtype, t.shape, false);
    if (s.is_ok()) s = check_device(runtime_->config(), names[i], t.device);
    if (s.is_ok()) s = check_reducible(names[i], t.dtype, t.device);
    // A group is negotiated and fused as one response on one device.
    if (s.is_ok() && !(t.device == tensors[0].device))
      s = invalid_argument("tensor '" + names[i] + "' is on " + device_text(t.device) + " but '" +
                           names[0] + "' on " + device_text(tensors[0].device) +
                           ": a group's tensors share one device");
    if (!s.is_ok()) {
      for (const auto& n : names)
        handles.push_back(failed(n, s.with_context("grouped allreduce")));
      return handles;
    }
  }
  if (options.process_set.id != 0 && !names.empty()) {
    auto set = runtime_->process_set_of_mine(options.process_set, "grouped allreduce");
    if (!set.is_ok()) {
      for (const auto& n : names) handles.push_back(failed(n, set.status()));
      return handles;
    }
  }
  const auto set_id = static_cast<uint32_t>(std::max(options.process_set.id, 0));
  uint64_t group = runtime_->next_group_id(set_id);
  std::vector<std::shared_ptr<PendingOp>> ops;
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorView& t = tensors[i];
    auto op = make_op(names[i], v1::COLLECTIVE_OP_ALLREDUCE, t.dtype, t.shape);
    op->process_set = set_id;
    set_reduction(*op, options);
    op->input = t.data;
    op->output = t.data;
    place(*op, t.device, t.stream);
    op->group_id = group;
    op->group_size = static_cast<uint32_t>(names.size());
    ops.push_back(std::move(op));
  }
  handles = runtime_->submit_group(std::move(ops));
  for (Handle& h : handles) h = watched(std::move(h), options.timeout, "grouped allreduce");
  return handles;
}

Handle Worker::allgather_async(const std::string& name, ConstTensorView input,
                               const OpOptions& options) {
  const ProcessSet process_set = options.process_set;
  if (Status s = check_tensor(rank(), name, input.data, input.dtype, input.shape, true); !s.is_ok())
    return failed(name, s);
  if (Status s = check_device(runtime_->config(), name, input.device); !s.is_ok())
    return failed(name, s);
  auto op = make_op(name, v1::COLLECTIVE_OP_ALLGATHER, input.dtype, input.shape);
  if (auto set = put_on_set(*runtime_, *op, process_set); !set.is_ok())
    return failed(name, set.status());
  place(*op, input.device, input.stream);
  op->input = input.data;
  return watched(runtime_->submit(std::move(op)), options.timeout, "allgather");
}

Handle Worker::broadcast_async(const std::string& name, TensorView inout, int root_rank,
                               const OpOptions& options) {
  const ProcessSet process_set = options.process_set;
  if (Status s = check_tensor(rank(), name, inout.data, inout.dtype, inout.shape, false); !s.is_ok())
    return failed(name, s);
  if (root_rank < 0 || root_rank >= size())
    return failed(name, invalid_argument("broadcast '" + name + "': root rank " +
                                         std::to_string(root_rank) + " is not in [0, " +
                                         std::to_string(size()) + ")"));
  if (Status s = check_device(runtime_->config(), name, inout.device); !s.is_ok())
    return failed(name, s);
  auto op = make_op(name, v1::COLLECTIVE_OP_BROADCAST, inout.dtype, inout.shape);
  auto set = put_on_set(*runtime_, *op, process_set);
  if (!set.is_ok()) return failed(name, set.status());
  // The coordinator and the set's data plane number the set's ranks 0..k-1.
  int root = root_rank;
  if (process_set.id != 0) {
    auto it = std::find(set->ranks.begin(), set->ranks.end(), root_rank);
    if (it == set->ranks.end())
      return failed(name, invalid_argument("broadcast '" + name + "': root rank " +
                                           std::to_string(root_rank) + " is not in process set " +
                                           std::to_string(process_set.id) + " (ranks " +
                                           set->ranks_text() + ")"));
    root = static_cast<int>(it - set->ranks.begin());
  }
  place(*op, inout.device, inout.stream);
  op->root_rank = root;
  op->input = inout.data;
  op->output = inout.data;
  return watched(runtime_->submit(std::move(op)), options.timeout, "broadcast");
}

Handle Worker::alltoall_async(const std::string& name, ConstTensorView input,
                              std::span<const int64_t> splits, const OpOptions& options) {
  const ProcessSet process_set = options.process_set;
  if (Status s = check_tensor(rank(), name, input.data, input.dtype, input.shape, true); !s.is_ok())
    return failed(name, s);
  auto op = make_op(name, v1::COLLECTIVE_OP_ALLTOALL, input.dtype, input.shape);
  auto set = put_on_set(*runtime_, *op, process_set);
  if (!set.is_ok()) return failed(name, set.status());
  const int ranks = process_set.id == 0 ? size() : set->size();
  int64_t rows = input.shape[0];
  std::vector<int64_t> chosen(splits.begin(), splits.end());
  if (chosen.empty()) {
    if (rows % ranks != 0)
      return failed(name, invalid_argument("alltoall '" + name + "': " + std::to_string(rows) +
                                           " rows do not split evenly over " +
                                           std::to_string(ranks) + " ranks; pass splits"));
    chosen.assign(static_cast<size_t>(ranks), rows / ranks);
  }
  if (static_cast<int>(chosen.size()) != ranks ||
      std::accumulate(chosen.begin(), chosen.end(), int64_t{0}) != rows ||
      std::any_of(chosen.begin(), chosen.end(), [](int64_t v) { return v < 0; }))
    return failed(name, invalid_argument("alltoall '" + name + "': splits must be " +
                                         std::to_string(ranks) +
                                         " non-negative row counts summing to dim 0 (" +
                                         std::to_string(rows) + ")"));
  if (Status s = check_device(runtime_->config(), name, input.device); !s.is_ok())
    return failed(name, s);
  place(*op, input.device, input.stream);
  op->splits = std::move(chosen);
  op->input = input.data;
  return watched(runtime_->submit(std::move(op)), options.timeout, "alltoall");
}

Handle Worker::reducescatter_async(const std::string& name, ConstTensorView input,
                                   const AllreduceOptions& options) {
  if (Status s = check_tensor(rank(), name, input.data, input.dtype, input.shape, true); !s.is_ok())
    return failed(name, s);
  if (Status s = check_device(runtime_->config(), name, input.device); !s.is_ok())
    return failed(name, s);
  if (Status s = check_reducible(name, input.dtype, input.device); !s.is_ok())
    return failed(name, s);
  auto op = make_op(name, v1::COLLECTIVE_OP_REDUCESCATTER, input.dtype, input.shape);
  if (auto set = put_on_set(*runtime_, *op, options.process_set); !set.is_ok())
    return failed(name, set.status());
  place(*op, input.device, input.stream);
  set_reduction(*op, options);
  op->input = input.data;
  return watched(runtime_->submit(std::move(op)), options.timeout, "reducescatter");
}

Handle Worker::barrier_async(const OpOptions& options) {
  const ProcessSet process_set = options.process_set;
  // The set first: a refused call must not use up a barrier number of any set.
  if (process_set.id != 0)
    if (auto set = runtime_->process_set_of_mine(process_set, "barrier"); !set.is_ok())
      return failed("barrier", set.status());
  const auto set_id = static_cast<uint32_t>(process_set.id);
  std::string name = (set_id == 0 ? "barrier." : "barrier.ps" + std::to_string(set_id) + ".") +
                     std::to_string(runtime_->next_barrier_id(set_id));
  auto op = make_op(name, v1::COLLECTIVE_OP_BARRIER, DataType::kUInt8, {0});
  if (auto set = put_on_set(*runtime_, *op, process_set); !set.is_ok())
    return failed(name, set.status());
  return watched(runtime_->submit(std::move(op)), options.timeout, "barrier");
}

Handle Worker::join_async() {
  return runtime_->submit(make_op("join", v1::COLLECTIVE_OP_JOIN, DataType::kUInt8, {0}));
}

void Worker::set_device_allocator(DeviceAllocator allocator) {
  runtime_->set_device_allocator(std::move(allocator));
}

Status Worker::wait(const Handle& handle) const {
  // This thread would only block: it sends the request itself. A handle done already (most of
  // a step's, once the first wait ran the step's round) has nothing to wait for.
  if (!handle.poll()) send_pending();
  return handle.wait(runtime_->config().op_timeout);
}

void Worker::send_pending() const { runtime_->send_pending(); }

// Blocking allreduces may run on the fast path, right here without the coordinator (runtime.h,
// 7.), when the call is plainly valid; everything else is checked and submitted as usual.
namespace {
// A two-view allreduce plainly valid for the fast path: CPU tensors of one dtype and shape.
bool fast_path_may_take(const ConstTensorView& input, const TensorView& output,
                        const AllreduceOptions& options) {
  return options.process_set.id == 0 && input.device.type == DeviceType::kCpu &&
         input.device == output.device &&
         input.data != nullptr && output.data != nullptr && input.dtype == output.dtype &&
         input.shape == output.shape && is_valid_dtype(static_cast<int>(input.dtype)) &&
         is_valid_reduce_op(static_cast<int>(options.op));
}
}  // namespace

Status Worker::allreduce(const std::string& name, const TensorView& inout,
                         const AllreduceOptions& options) {
  // Not through the two-view overload: a ConstTensorView copy costs the hot path an allocation.
  if (options.process_set.id == 0 && inout.device.type == DeviceType::kCpu && inout.data != nullptr &&
      is_valid_dtype(static_cast<int>(inout.dtype)) &&
      is_valid_reduce_op(static_cast<int>(options.op)))
    if (auto done = runtime_->try_fast_allreduce(
            {name, inout.data, inout.data, inout.dtype, inout.shape, options}))
      return *done;
  return wait(allreduce_async(name, inout, options));
}

Status Worker::allreduce(const std::string& name, const ConstTensorView& input,
                         const TensorView& output, const AllreduceOptions& options) {
  if (fast_path_may_take(input, output, options))
    if (auto done = runtime_->try_fast_allreduce(
            {name, input.data, output.data, input.dtype, input.shape, options}))
      return *done;
  return wait(allreduce_async(name, input, output, options));
}

Handle Worker::allreduce_now_or_async(const std::string& name, const ConstTensorView& input,
                                      const TensorView& output, const AllreduceOptions& options) {
  if (fast_path_may_take(input, output, options))
    if (auto done = runtime_->try_fast_allreduce(
            {name, input.data, output.data, input.dtype, input.shape, options}))
      return Handle(HandleState::failed(name, *done));  // complete, with the fast path's status
  Handle handle = allreduce_async(name, input, output, options);
  runtime_->send_pending();  // the caller waits next: send it now (as wait() would)
  return handle;
}

std::optional<Status> Worker::allreduce_now(const std::string& name, const void* input,
                                            const TensorView& output,
                                            const AllreduceOptions& options) {
  if (options.process_set.id != 0 || output.device.type != DeviceType::kCpu ||
      input == nullptr || output.data == nullptr ||
      !is_valid_dtype(static_cast<int>(output.dtype)) ||
      !is_valid_reduce_op(static_cast<int>(options.op)))
    return std::nullopt;
  return runtime_->try_fast_allreduce(
      {name, input, output.data, output.dtype, output.shape, options});
}

namespace {
Result<OwnedTensor> take_output(const Handle& h, Status s) {
  if (!s.is_ok()) return s;
  return h.output_tensor();
}
}  // namespace

Result<OwnedTensor> Worker::allgather(const std::string& name, ConstTensorView input,
                                     const OpOptions& options) {
  Handle h = allgather_async(name, std::move(input), options);
  return take_output(h, wait(h));
}

Status Worker::broadcast(const std::string& name, TensorView inout, int root_rank,
                         const OpOptions& options) {
  return wait(broadcast_async(name, std::move(inout), root_rank, options));
}

Result<OwnedTensor> Worker::alltoall(const std::string& name, ConstTensorView input,
                                     std::span<const int64_t> splits, const OpOptions& options) {
  Handle h = alltoall_async(name, std::move(input), splits, options);
  return take_output(h, wait(h));
}

Result<OwnedTensor> Worker::reducescatter(const std::string& name, ConstTensorView input,
                                          const AllreduceOptions& options) {
  Handle h = reducescatter_async(name, std::move(input), options);
  return take_output(h, wait(h));
}

Status Worker::barrier(const OpOptions& options) { return wait(barrier_async(options)); }

Result<int> Worker::join() {
  Handle h = join_async();
  HVRUN_RETURN_IF_ERROR(wait(h));
  return h.join_result();
}

}  // namespace hvrun

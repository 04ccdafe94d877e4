#include "python/tf_ops/kernel_support.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <utility>

#include "python/tf_ops/deadline_watch.h"
#include "python/tf_ops/worker_slot.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/threadpool.h"

namespace hvrun::tensorflow_ops {

std::optional<DataType> reduced_dtype(tf::DataType dtype) {
  switch (dtype) {
    case tf::DT_UINT8: return DataType::kUInt8;
    case tf::DT_INT8: return DataType::kInt8;
    case tf::DT_INT32: return DataType::kInt32;
    case tf::DT_INT64: return DataType::kInt64;
    case tf::DT_HALF: return DataType::kFloat16;
    case tf::DT_BFLOAT16: return DataType::kBFloat16;
    case tf::DT_FLOAT: return DataType::kFloat32;
    case tf::DT_DOUBLE: return DataType::kFloat64;
    default: return std::nullopt;
  }
}

std::optional<DataType> moved_dtype(tf::DataType dtype) {
  switch (dtype) {
    case tf::DT_BOOL: return DataType::kUInt8;
    case tf::DT_INT16:
    case tf::DT_UINT16: return DataType::kFloat16;
    default: return reduced_dtype(dtype);
  }
}

std::vector<int64_t> shape_of(const tf::Tensor& tensor) {
  std::vector<int64_t> shape(static_cast<size_t>(tensor.dims()));
  for (int i = 0; i < tensor.dims(); ++i) shape[static_cast<size_t>(i)] = tensor.dim_size(i);
  return shape;
}

ConstTensorView const_view_of(const tf::Tensor& tensor, DataType dtype, const Placement& placement) {
  return ConstTensorView(tensor.data(), dtype, shape_of(tensor), placement.device, placement.stream);
}

TensorView view_of(tf::Tensor& tensor, DataType dtype, const Placement& placement) {
  return TensorView{tensor.data(), dtype, shape_of(tensor), placement.device, placement.stream};
}

absl::Status to_tf_status(const Status& status) {
  if (status.is_ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(static_cast<int>(status.code())), status.message());
}

absl::StatusCode collective_tf_code(StatusCode code) {
  switch (code) {
    // The library's INVALID_ARGUMENT for a collective is a request the job refused: metadata
    // that differ between ranks (shapes, dtypes, roots, ops, splits), or a tensor the library
    // cannot run. Horovod reports both as a precondition error, which its TensorFlow ops raise
    // as FailedPreconditionError; users' code catches that class.
    case StatusCode::kInvalidArgument:
      return absl::StatusCode::kFailedPrecondition;
    default:
      // hvrun's codes are gRPC's, as absl's are: the same code (ABORTED for a lost peer or an
      // aborted job, as Horovod's AbortedError; DEADLINE_EXCEEDED for the op timeout, ...).
      return static_cast<absl::StatusCode>(static_cast<int>(code));
  }
}

absl::Status collective_tf_status(const Status& status) {
  if (status.is_ok()) return absl::OkStatus();
  return absl::Status(collective_tf_code(status.code()), status.message());
}

Result<ReduceOp> reduce_op_of_horovod_constant(int op) {
  switch (op) {
    case 0: return ReduceOp::kAverage;
    case 1: return ReduceOp::kSum;
    case 3: return ReduceOp::kMin;
    case 4: return ReduceOp::kMax;
    case 5: return ReduceOp::kProduct;
    case 2: return unimplemented("hvrun does not implement Adasum; use Average or Sum");
    default:
      return invalid_argument("unknown reduce op " + std::to_string(op) +
                              "; use Average (0), Sum (1), Min (3), Max (4) or Product (5)");
  }
}

CollectiveKernel::CollectiveKernel(tf::OpKernelConstruction* context)
    : tf::AsyncOpKernel(context), tensor_name_(name()) {
  bool ignore_name_scope = false;
  if (context->HasAttr("ignore_name_scope")) {
    OP_REQUIRES_OK(context, context->GetAttr("ignore_name_scope", &ignore_name_scope));
  }
  if (context->HasAttr("process_set_id")) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_.id));
  }
  if (ignore_name_scope) {
    if (auto slash = tensor_name_.find_last_of('/'); slash != std::string::npos)
      tensor_name_ = tensor_name_.substr(slash + 1);
  }
  // Eagerly, TensorFlow names every kernel after its op type, whatever name the call gave; the
  // Python side passes a named eager call's name here instead (mpi_ops.py, _eager_name).
  std::string given;
  if (context->HasAttr("tensor_name")) OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &given));
  if (!given.empty()) tensor_name_ = std::move(given);
}

bool CollectiveKernel::submit(tf::OpKernelContext* context, const DoneCallback& done,
                              const std::function<void(Worker&)>& submit_with) {
  const bool submitted = WorkerSlot::of_process().with_worker([&](Worker& worker) {
    rank_ = worker.rank();
    submit_with(worker);
  });
  if (submitted) return true;
  fail(context, done,
       failed_precondition("hvrun.tensorflow has not been initialized; use hvd.init() (op '" +
                           tensor_name_ + "')"));
  return false;
}

std::optional<std::vector<Placement>> CollectiveKernel::input_placements(tf::OpKernelContext* context,
                                                                        const DoneCallback& done) {
  std::vector<Placement> placements;
  for (int i = 0; i < context->num_inputs(); ++i) {
    Result<Placement> placement = input_placement(context, i);
    if (!placement.is_ok()) {
      fail(context, done, placement.status());
      return std::nullopt;
    }
    placements.push_back(*placement);
  }
  return placements;
}

void CollectiveKernel::fail(tf::OpKernelContext* context, const DoneCallback& done,
                            const Status& status) {
  context->SetStatus(collective_tf_status(status));
  done();
}

absl::Status CollectiveKernel::outputs_from_handles(tf::OpKernelContext* context,
                                                    const std::vector<Handle>& handles) {
  for (size_t i = 0; i < handles.size(); ++i)
    TF_RETURN_IF_ERROR(output_from_handle(context, static_cast<int>(i), handles[i]));
  return absl::OkStatus();
}

Status CollectiveKernel::refused(const Worker& worker, const std::string& what) {
  return invalid_argument("rank " + std::to_string(worker.rank()) + ": " + what);
}

namespace {

// What the handles of one op share until the last completes.
struct PendingOp {
  std::atomic<size_t> left{0};
  std::atomic<bool> finishing{false};  // finish was handed to TensorFlow (completion or deadline)
  std::mutex mutex;
  Status first_failure;  // guarded by mutex
  std::function<void(const Status&)> finish;
  tf::OpKernelContext* context = nullptr;  // valid until finish called done()
  std::vector<tf::Tensor> keep_alive;      // read or written by the collectives until they complete
  uint64_t deadline_entry = 0;
};

// The worker's operation timeout (--op-timeout, HVRUN_OP_TIMEOUT), read once.
std::chrono::milliseconds op_timeout() {
  static const std::chrono::milliseconds timeout = [] {
    auto config = Config::from_environment();
    return config.is_ok() ? config->op_timeout : std::chrono::milliseconds(300000);
  }();
  return timeout;
}

// Hands finish(status) to TensorFlow's threads, unless it already was.
void finish_once(const std::shared_ptr<PendingOp>& pending, Status status) {
  if (pending->finishing.exchange(true)) return;
  auto* threads = pending->context->device()->tensorflow_cpu_worker_threads();
  threads->workers->Schedule([pending, status = std::move(status)] { pending->finish(status); });
}

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

}  // namespace

void CollectiveKernel::when_complete(tf::OpKernelContext* context, std::vector<Handle> handles,
                                     std::vector<tf::Tensor> written,
                                     std::function<void(const Status&)> finish) {
  if (handles.empty()) {
    finish(Status::ok());
    return;
  }
  // The graph waits for the op from now until its last handle completes: straggler
  // attribution's blocked time, as a wait() would count it.
  const auto submitted = std::chrono::steady_clock::now();
  auto pending = std::make_shared<PendingOp>();
  pending->left = handles.size();
  pending->finish = std::move(finish);
  pending->context = context;
  pending->keep_alive = std::move(written);
  for (int i = 0; i < context->num_inputs(); ++i) pending->keep_alive.push_back(context->input(i));

  const std::string message = "rank " + std::to_string(rank_.load()) + ": collective '" +
                              handles.front().name() + "' did not complete within " +
                              seconds_text(op_timeout()) +
                              " s (--op-timeout; some rank may not have submitted it: the "
                              "coordinator's stall warning names the ranks it waits for)";
  std::weak_ptr<PendingOp> watched = pending;
  pending->deadline_entry = DeadlineWatch::of_process().add(
      DeadlineWatch::Clock::now() + op_timeout(), [watched, message] {
        if (auto expired = watched.lock()) finish_once(expired, deadline_exceeded(message));
      });

  for (const Handle& handle : handles) {
    handle.on_complete([pending, handle, submitted](const Status& status) {
      if (!status.is_ok()) {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (pending->first_failure.is_ok()) pending->first_failure = status;
      }
      if (pending->left.fetch_sub(1) != 1) return;
      handle.count_wait_since(submitted);
      // The last one: the rest runs on TensorFlow's threads, never on the worker's.
      DeadlineWatch::of_process().cancel(pending->deadline_entry);
      Status final_status;
      {
        std::lock_guard<std::mutex> lock(pending->mutex);
        final_status = pending->first_failure;
      }
      finish_once(pending, std::move(final_status));
    });
  }
}

void CollectiveKernel::complete_with_outputs(tf::OpKernelContext* context,
                                             std::vector<Handle> handles,
                                             std::function<absl::Status()> produce,
                                             DoneCallback done) {
  when_complete(context, std::move(handles), {},
                [context, produce = std::move(produce), done = std::move(done)](const Status& s) {
                  context->SetStatus(s.is_ok() ? produce() : collective_tf_status(s));
                  done();
                });
}

void CollectiveKernel::complete_in_place(tf::OpKernelContext* context, std::vector<Handle> handles,
                                         std::vector<tf::Tensor> written, DoneCallback done) {
  when_complete(context, std::move(handles), std::move(written),
                [context, done = std::move(done)](const Status& s) {
                  if (!s.is_ok()) context->SetStatus(collective_tf_status(s));
                  done();
                });
}

}  // namespace hvrun::tensorflow_ops

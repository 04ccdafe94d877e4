// Kernels without tensor data: join and barrier (asynchronous), and the topology ops that read
// the worker's rank and size when the graph runs (Horovod's size_op, rank_op, ...).
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "python/tf_ops/kernel_support.h"
#include "python/tf_ops/worker_slot.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace hvrun::tensorflow_ops {
namespace {

class JoinKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    Handle handle;
    submit(context, done, [&](Worker& worker) { handle = worker.join_async(); });
    if (!handle.valid()) return;
    complete_with_outputs(
        context, {handle},
        [context, handle]() -> absl::Status {
          tf::Tensor* last_rank = nullptr;
          TF_RETURN_IF_ERROR(context->allocate_output(0, tf::TensorShape({}), &last_rank));
          last_rank->scalar<int32_t>()() = handle.join_result();
          return absl::OkStatus();
        },
        std::move(done));
  }
};

class BarrierKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    Handle handle;
    submit(context, done, [&](Worker& worker) { handle = worker.barrier_async(process_set()); });
    if (handle.valid()) complete_in_place(context, {handle}, {}, std::move(done));
  }
};

// mark_step() / mark_phase(phase) on the worker when the op runs; FAILED_PRECONDITION before
// init().
class MarkKernel : public tf::OpKernel {
 public:
  explicit MarkKernel(tf::OpKernelConstruction* context) : tf::OpKernel(context) {
    is_phase_ = context->HasAttr("phase");
    if (is_phase_) OP_REQUIRES_OK(context, context->GetAttr("phase", &phase_));
  }

  void Compute(tf::OpKernelContext* context) override {
    const bool marked = WorkerSlot::of_process().with_worker([&](Worker& worker) {
      if (is_phase_)
        worker.mark_phase(phase_);
      else
        worker.mark_step();
    });
    if (!marked)
      context->SetStatus(absl::FailedPreconditionError(
          "hvrun.tensorflow has not been initialized; use hvd.init() (op '" + name() + "')"));
  }

 private:
  bool is_phase_ = false;
  std::string phase_;
};

// A scalar read from the worker, of the op's process set (process_set_id, 0 when the op has
// none); FAILED_PRECONDITION before init(), the worker's error for a set that does not exist.
class TopologyKernel : public tf::OpKernel {
 public:
  using Read = std::function<Result<int>(const Worker&, ProcessSet)>;
  TopologyKernel(tf::OpKernelConstruction* context, Read read)
      : tf::OpKernel(context), read_(std::move(read)) {
    if (context->HasAttr("process_set_id")) {
      OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_.id));
    }
  }

  void Compute(tf::OpKernelContext* context) override {
    Result<int> value = 0;
    if (!WorkerSlot::of_process().with_worker([&](Worker& worker) { value = read_(worker, process_set_); })) {
      context->SetStatus(absl::FailedPreconditionError(
          "hvrun.tensorflow has not been initialized; use hvd.init() (op '" + name() + "')"));
      return;
    }
    OP_REQUIRES_OK(context, to_tf_status(value.status()));
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = *value;
  }

 private:
  Read read_;
  ProcessSet process_set_;
};

template <int (Worker::*kRead)() const>
class TopologyValueKernel : public TopologyKernel {
 public:
  explicit TopologyValueKernel(tf::OpKernelConstruction* context)
      : TopologyKernel(context, [](const Worker& w, ProcessSet) -> Result<int> { return (w.*kRead)(); }) {}
};

// The set's members, or NOT_FOUND for a set that was never added (or was removed).
Result<std::vector<int>> members_of(const Worker& worker, ProcessSet process_set) {
  Result<std::vector<int>> ranks = worker.process_set_ranks(process_set);
  if (!ranks.is_ok()) {
    return Status(ranks.status().code(), "rank " + std::to_string(worker.rank()) + ": " +
                                             ranks.status().message() +
                                             " (add it with hvd.add_process_set on every rank)");
  }
  return ranks;
}

// A value of the set's members; the op fails for a set that does not exist.
class SetMembersKernel : public TopologyKernel {
 public:
  using OfMembers = int (*)(const Worker&, const std::vector<int>&);
  SetMembersKernel(tf::OpKernelConstruction* context, OfMembers of_members)
      : TopologyKernel(context, [of_members](const Worker& w, ProcessSet set) -> Result<int> {
          auto ranks = members_of(w, set);
          if (!ranks.is_ok()) return ranks.status();
          return of_members(w, *ranks);
        }) {}
};

// Horovod's size_op: the number of ranks of the set.
class SizeKernel : public SetMembersKernel {
 public:
  explicit SizeKernel(tf::OpKernelConstruction* context)
      : SetMembersKernel(context, [](const Worker&, const std::vector<int>& ranks) {
          return static_cast<int>(ranks.size());
        }) {}
};

// 1 when this rank is a member of the set, else 0.
class ProcessSetIncludedKernel : public SetMembersKernel {
 public:
  explicit ProcessSetIncludedKernel(tf::OpKernelConstruction* context)
      : SetMembersKernel(context, [](const Worker& w, const std::vector<int>& ranks) {
          return std::find(ranks.begin(), ranks.end(), w.rank()) != ranks.end() ? 1 : 0;
        }) {}
};

REGISTER_KERNEL_BUILDER(Name("HvrunJoin").Device(tf::DEVICE_CPU), JoinKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunMarkStep").Device(tf::DEVICE_CPU), MarkKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunMarkPhase").Device(tf::DEVICE_CPU), MarkKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunBarrier").Device(tf::DEVICE_CPU), BarrierKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunSize").Device(tf::DEVICE_CPU), SizeKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunLocalSize").Device(tf::DEVICE_CPU), TopologyValueKernel<&Worker::local_size>);
REGISTER_KERNEL_BUILDER(Name("HvrunRank").Device(tf::DEVICE_CPU), TopologyValueKernel<&Worker::rank>);
REGISTER_KERNEL_BUILDER(Name("HvrunLocalRank").Device(tf::DEVICE_CPU), TopologyValueKernel<&Worker::local_rank>);
REGISTER_KERNEL_BUILDER(Name("HvrunProcessSetIncluded").Device(tf::DEVICE_CPU), ProcessSetIncludedKernel);

// On a GPU device too, so that a graph placed there needs no copies: their values stay on the host.
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunJoin").Device(tf::DEVICE_GPU).HostMemory("output"), JoinKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunBarrier").Device(tf::DEVICE_GPU), BarrierKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunMarkStep").Device(tf::DEVICE_GPU), MarkKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunMarkPhase").Device(tf::DEVICE_GPU), MarkKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunSize").Device(tf::DEVICE_GPU).HostMemory("size"), SizeKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunLocalSize").Device(tf::DEVICE_GPU).HostMemory("local_size"),
                          TopologyValueKernel<&Worker::local_size>);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunRank").Device(tf::DEVICE_GPU).HostMemory("rank"), TopologyValueKernel<&Worker::rank>);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunLocalRank").Device(tf::DEVICE_GPU).HostMemory("local_rank"),
                          TopologyValueKernel<&Worker::local_rank>);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunProcessSetIncluded").Device(tf::DEVICE_GPU).HostMemory("included"),
                          ProcessSetIncludedKernel);

}  // namespace
}  // namespace hvrun::tensorflow_ops

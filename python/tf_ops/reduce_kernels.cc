// Kernels of the collectives whose output has the input's shape or is a slice of the reduction:
// allreduce, grouped allreduce, broadcast, reducescatter, grouped reducescatter. The same kernels
// serve TensorFlow's CPU and GPU devices (a GPU tensor's view names TensorFlow's stream).
#include <string>
#include <utility>
#include <vector>

#include "python/tf_ops/kernel_support.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace hvrun::tensorflow_ops {
namespace {

// The attributes every reducing op has: reduce_op (Horovod's constant) and the scale factors;
// the collective runs on `process_set`.
AllreduceOptions reduce_options_of(tf::OpKernelConstruction* context, ProcessSet process_set) {
  int op = 0;
  float prescale = 1.0f;
  float postscale = 1.0f;
  AllreduceOptions options;
  options.process_set = process_set;
  for (absl::Status read : {context->GetAttr("reduce_op", &op), context->GetAttr("prescale_factor", &prescale),
                            context->GetAttr("postscale_factor", &postscale)}) {
    if (!read.ok()) {
      context->CtxFailure(read);
      return options;
    }
  }
  Result<ReduceOp> reduce_op = reduce_op_of_horovod_constant(op);
  if (!reduce_op.is_ok()) {
    context->CtxFailure(to_tf_status(reduce_op.status()));
    return options;
  }
  options.op = *reduce_op;
  options.prescale = prescale;
  options.postscale = postscale;
  return options;
}

std::string dtype_refusal(const char* op, const std::string& name, tf::DataType dtype,
                          const char* supported) {
  return std::string(op) + " of tensor '" + name + "': dtype " + tf::DataTypeString(dtype) +
         " is not supported (supported: " + supported + ")";
}

constexpr const char* kReducedNames = "uint8, int8, int32, int64, float16, bfloat16, float32, float64";
constexpr const char* kMovedNames =
    "uint8, int8, uint16, int16, int32, int64, float16, bfloat16, float32, float64, bool";

class AllreduceKernel : public CollectiveKernel {
 public:
  explicit AllreduceKernel(tf::OpKernelConstruction* context)
      : CollectiveKernel(context), options_(reduce_options_of(context, process_set())) {}

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const tf::Tensor& input = context->input(0);
    auto placements = input_placements(context, done);
    if (!placements) return;
    const Placement& placement = placements->front();
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    Handle handle;
    submit(context, done, [&](Worker& worker) {
      auto dtype = reduced_dtype(input.dtype());
      if (!dtype) {
        fail(context, done, refused(worker, dtype_refusal("allreduce", tensor_name(), input.dtype(), kReducedNames)));
        return;
      }
      handle = worker.allreduce_async(tensor_name(), const_view_of(input, *dtype, placement),
                                      view_of(*output, *dtype, placement), options_);
    });
    if (handle.valid()) complete_in_place(context, {handle}, {*output}, std::move(done));
  }

 private:
  AllreduceOptions options_;
};

// One negotiation for all: the tensors are reduced together and complete together.
class GroupedAllreduceKernel : public CollectiveKernel {
 public:
  explicit GroupedAllreduceKernel(tf::OpKernelConstruction* context)
      : CollectiveKernel(context), options_(reduce_options_of(context, process_set())) {}

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const int count = context->num_inputs();
    auto placements = input_placements(context, done);
    if (!placements) return;
    std::vector<std::string> names;
    std::vector<tf::Tensor*> outputs(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      // In place on the output: the input's buffer when TensorFlow can hand it over, a copy else.
      OP_REQUIRES_OK_ASYNC(context,
                           context->forward_input_or_allocate_output(
                               {i}, i, context->input(i).shape(), &outputs[static_cast<size_t>(i)]),
                           done);
      OP_REQUIRES_OK_ASYNC(context,
                           copy_tensor((*placements)[static_cast<size_t>(i)], context->input(i),
                                       outputs[static_cast<size_t>(i)]),
                           done);
      names.push_back(tensor_name() + "_" + std::to_string(i));
    }
    std::vector<Handle> handles;
    submit(context, done, [&](Worker& worker) {
      std::vector<TensorView> views;
      for (int i = 0; i < count; ++i) {
        auto dtype = reduced_dtype(context->input(i).dtype());
        if (!dtype) {
          fail(context, done,
               refused(worker, dtype_refusal("grouped_allreduce", names[static_cast<size_t>(i)],
                                             context->input(i).dtype(), kReducedNames)));
          return;
        }
        views.push_back(view_of(*outputs[static_cast<size_t>(i)], *dtype, (*placements)[static_cast<size_t>(i)]));
      }
      handles = worker.grouped_allreduce_async(names, views, options_);
    });
    std::vector<tf::Tensor> written;
    for (tf::Tensor* output : outputs) written.push_back(*output);
    if (!handles.empty() || count == 0)
      complete_in_place(context, std::move(handles), std::move(written), std::move(done));
  }

 private:
  AllreduceOptions options_;
};

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(tf::OpKernelConstruction* context) : CollectiveKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const tf::Tensor& input = context->input(0);
    auto placements = input_placements(context, done);
    if (!placements) return;
    const Placement& placement = placements->front();
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output),
                         done);
    OP_REQUIRES_OK_ASYNC(context, copy_tensor(placement, input, output), done);
    Handle handle;
    submit(context, done, [&](Worker& worker) {
      auto dtype = moved_dtype(input.dtype());
      if (!dtype) {
        fail(context, done, refused(worker, dtype_refusal("broadcast", tensor_name(), input.dtype(), kMovedNames)));
        return;
      }
      handle = worker.broadcast_async(tensor_name(), view_of(*output, *dtype, placement), root_rank_,
                                      process_set());
    });
    if (handle.valid()) complete_in_place(context, {handle}, {*output}, std::move(done));
  }

 private:
  int root_rank_ = 0;
};

// Reducescatter, one tensor or several (each negotiated on its own; they fuse when ready
// together). The results are library-allocated and copied into the outputs.
class ReducescatterKernel : public CollectiveKernel {
 public:
  explicit ReducescatterKernel(tf::OpKernelConstruction* context)
      : CollectiveKernel(context), options_(reduce_options_of(context, process_set())) {}

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const int count = context->num_inputs();
    auto placements = input_placements(context, done);
    if (!placements) return;
    std::vector<Handle> handles;
    bool refused_one = false;
    submit(context, done, [&](Worker& worker) {
      for (int i = 0; i < count; ++i) {
        const tf::Tensor& input = context->input(i);
        const std::string name = count == 1 && !grouped() ? tensor_name() : tensor_name() + "_" + std::to_string(i);
        auto dtype = reduced_dtype(input.dtype());
        if (!dtype || input.dims() == 0) {
          refused_one = true;
          fail(context, done,
               refused(worker, !dtype ? dtype_refusal("reducescatter", name, input.dtype(), kReducedNames)
                                      : "reducescatter of tensor '" + name + "': a scalar cannot be scattered"));
          return;
        }
        handles.push_back(worker.reducescatter_async(
            name, const_view_of(input, *dtype, (*placements)[static_cast<size_t>(i)]), options_));
      }
    });
    if (refused_one || handles.size() != static_cast<size_t>(count)) return;
    complete_with_outputs(context, handles, [context, handles] { return outputs_from_handles(context, handles); },
                          std::move(done));
  }

 private:
  bool grouped() const { return type_string() == "HvrunGroupedReducescatter"; }
  AllreduceOptions options_;
};

REGISTER_KERNEL_BUILDER(Name("HvrunAllreduce").Device(tf::DEVICE_CPU), AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunGroupedAllreduce").Device(tf::DEVICE_CPU), GroupedAllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunBroadcast").Device(tf::DEVICE_CPU), BroadcastKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunReducescatter").Device(tf::DEVICE_CPU), ReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunGroupedReducescatter").Device(tf::DEVICE_CPU), ReducescatterKernel);

HVRUN_REGISTER_GPU_KERNEL(Name("HvrunAllreduce").Device(tf::DEVICE_GPU), AllreduceKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunGroupedAllreduce").Device(tf::DEVICE_GPU), GroupedAllreduceKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunBroadcast").Device(tf::DEVICE_GPU), BroadcastKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunReducescatter").Device(tf::DEVICE_GPU), ReducescatterKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunGroupedReducescatter").Device(tf::DEVICE_GPU), ReducescatterKernel);

}  // namespace
}  // namespace hvrun::tensorflow_ops

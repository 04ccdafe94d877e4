// Kernels of the collectives whose result size is known only when they complete: allgather,
// grouped allgather, alltoall. The results are library-allocated and become the outputs on one
// of TensorFlow's threads (host results copied, GPU results handed over: device_tensors.h).
#include <string>
#include <utility>
#include <vector>

#include "python/tf_ops/kernel_support.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace hvrun::tensorflow_ops {
namespace {

std::string moved_refusal(const char* op, const std::string& name, tf::DataType dtype) {
  return std::string(op) + " of tensor '" + name + "': dtype " + tf::DataTypeString(dtype) +
         " is not supported (supported: uint8, int8, uint16, int16, int32, int64, float16, "
         "bfloat16, float32, float64, bool)";
}

// Allgather of one tensor (HvrunAllgather) or of each of several (HvrunGroupedAllgather,
// negotiated one by one; they fuse when ready together).
class AllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const int count = context->num_inputs();
    const bool grouped = type_string() == "HvrunGroupedAllgather";
    auto placements = input_placements(context, done);
    if (!placements) return;
    std::vector<Handle> handles;
    bool refused_one = false;
    submit(context, done, [&](Worker& worker) {
      for (int i = 0; i < count; ++i) {
        const tf::Tensor& input = context->input(i);
        const std::string name = grouped ? tensor_name() + "_" + std::to_string(i) : tensor_name();
        auto dtype = moved_dtype(input.dtype());
        if (!dtype || input.dims() == 0) {
          refused_one = true;
          fail(context, done,
               refused(worker, !dtype ? moved_refusal("allgather", name, input.dtype())
                                      : "allgather of tensor '" + name +
                                            "': a scalar has no dimension 0 to concatenate "
                                            "(reshape it to [1])"));
          return;
        }
        handles.push_back(
            worker.allgather_async(name, const_view_of(input, *dtype, (*placements)[static_cast<size_t>(i)]),
                                   process_set()));
      }
    });
    if (refused_one || handles.size() != static_cast<size_t>(count)) return;
    complete_with_outputs(context, handles, [context, handles] { return outputs_from_handles(context, handles); },
                          std::move(done));
  }
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const tf::Tensor& input = context->input(0);
    const tf::Tensor& splits_tensor = context->input(1);  // host memory on a GPU too
    auto placements = input_placements(context, done);
    if (!placements) return;
    OP_REQUIRES_ASYNC(context, splits_tensor.dims() == 1,
                      absl::InvalidArgumentError("alltoall of tensor '" + tensor_name() +
                                                 "': splits must be a vector"),
                      done);
    std::vector<int64_t> splits;
    auto flat = splits_tensor.flat<int32_t>();
    for (int64_t i = 0; i < flat.size(); ++i) splits.push_back(flat(i));
    Handle handle;
    submit(context, done, [&](Worker& worker) {
      auto dtype = moved_dtype(input.dtype());
      if (!dtype || input.dims() == 0) {
        fail(context, done,
             refused(worker, !dtype ? moved_refusal("alltoall", tensor_name(), input.dtype())
                                    : "alltoall of tensor '" + tensor_name() +
                                          "': a scalar has no dimension 0 to split"));
        return;
      }
      handle = worker.alltoall_async(tensor_name(), const_view_of(input, *dtype, placements->front()), splits,
                                     process_set());
    });
    if (!handle.valid()) return;
    complete_with_outputs(
        context, {handle},
        [context, handle]() -> absl::Status {
          TF_RETURN_IF_ERROR(outputs_from_handles(context, {handle}));
          const std::vector<int64_t> received = handle.received_splits();
          tf::Tensor* received_splits = nullptr;
          TF_RETURN_IF_ERROR(context->allocate_output(
              1, tf::TensorShape({static_cast<int64_t>(received.size())}), &received_splits));
          auto out = received_splits->flat<int32_t>();
          for (size_t i = 0; i < received.size(); ++i)
            out(static_cast<int64_t>(i)) = static_cast<int32_t>(received[i]);
          return absl::OkStatus();
        },
        std::move(done));
  }
};

REGISTER_KERNEL_BUILDER(Name("HvrunAllgather").Device(tf::DEVICE_CPU), AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunGroupedAllgather").Device(tf::DEVICE_CPU), AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("HvrunAlltoall").Device(tf::DEVICE_CPU), AlltoallKernel);

HVRUN_REGISTER_GPU_KERNEL(Name("HvrunAllgather").Device(tf::DEVICE_GPU), AllgatherKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunGroupedAllgather").Device(tf::DEVICE_GPU), AllgatherKernel);
HVRUN_REGISTER_GPU_KERNEL(Name("HvrunAlltoall").Device(tf::DEVICE_GPU).HostMemory("splits").HostMemory("received_splits"),
                          AlltoallKernel);

}  // namespace
}  // namespace hvrun::tensorflow_ops

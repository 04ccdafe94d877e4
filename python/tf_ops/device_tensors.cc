#include "python/tf_ops/device_tensors.h"

#include <cstring>
#include <string>
#include <utility>

#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/device_base.h"
#include "xla/stream_executor/device_address.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"

namespace hvrun::tensorflow_ops {
namespace {

Result<Placement> placement_of(tf::OpKernelContext* context, tf::MemoryType memory) {
  if (memory == tf::HOST_MEMORY || context->device()->tensorflow_accelerator_device_info() == nullptr)
    return Placement{};
  tf::DeviceContext* device_context = context->op_device_context();
  stream_executor::Stream* stream = device_context != nullptr ? device_context->stream() : nullptr;
  void* handle = stream != nullptr ? stream->platform_specific_handle().stream : nullptr;
  if (handle == nullptr)
    return internal_error("op '" + context->op_kernel().name() + "' runs on " + context->device()->name() +
                          ", but TensorFlow gave it no CUDA stream there; hvrun's GPU kernels need "
                          "TensorFlow's CUDA build (pip install tensorflow[and-cuda])");
  const int ordinal = stream->parent()->device_ordinal();
  if (ordinal < 0)
    return internal_error("op '" + context->op_kernel().name() + "' runs on " + context->device()->name() +
                          ", whose stream executor names no CUDA device");
  return Placement{Device::cuda(ordinal), handle, stream};
}

// A tensor's buffer that is a handle's library-allocated device memory: TensorFlow's reference
// count decides when it goes, and with it the handle's share of the memory.
class HandleOutputBuffer final : public tf::TensorBuffer {
 public:
  HandleOutputBuffer(OwnedTensor owned, size_t bytes)
      : tf::TensorBuffer(owned.data()), owned_(std::move(owned)), bytes_(bytes) {}

  size_t size() const override { return bytes_; }
  tf::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tf::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocated_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocator_name("hvrun");
  }
  tf::AllocatorMemoryType GetMemoryType() const override { return tf::AllocatorMemoryType::kDevice; }

 private:
  OwnedTensor owned_;
  size_t bytes_;
};

}  // namespace

Result<Placement> input_placement(tf::OpKernelContext* context, int index) {
  return placement_of(context, context->input_memory_type(index));
}

Result<Placement> output_placement(tf::OpKernelContext* context, int index) {
  return placement_of(context, context->output_memory_type(index));
}

absl::Status copy_tensor(const Placement& placement, const tf::Tensor& from, tf::Tensor* to) {
  const size_t bytes = from.TotalBytes();
  if (bytes == 0 || from.data() == to->data()) return absl::OkStatus();
  if (!placement.on_gpu()) {
    std::memcpy(to->data(), from.data(), bytes);
    return absl::OkStatus();
  }
  stream_executor::DeviceAddressBase destination(to->data(), bytes);
  return placement.tf_stream->Memcpy(&destination,
                                     stream_executor::DeviceAddressBase(const_cast<void*>(from.data()), bytes),
                                     bytes);
}

absl::Status output_from_handle(tf::OpKernelContext* context, int index, const Handle& handle) {
  TensorView result = handle.output();
  tf::TensorShape shape;
  for (int64_t d : result.shape) TF_RETURN_IF_ERROR(shape.AddDimWithStatus(d));
  const size_t bytes = result.bytes();
  if (result.device.is_cuda() && bytes > 0) {
    context->set_output(index, tf::Tensor(context->expected_output_dtype(index), shape,
                                          tf::core::RefCountPtr<tf::TensorBuffer>(
                                              new HandleOutputBuffer(handle.output_tensor(), bytes))));
    return absl::OkStatus();
  }
  tf::Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(index, shape, &output));
  if (bytes > 0) std::memcpy(output->data(), result.data, bytes);
  return absl::OkStatus();
}

}  // namespace hvrun::tensorflow_ops

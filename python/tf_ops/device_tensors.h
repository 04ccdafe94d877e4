// Where a kernel's tensors live, as hvrun's views say it, and the device-side work a kernel does
// around its collective: host memory, or a GPU with TensorFlow's compute stream of that GPU.
//
// A GPU tensor's view carries the device pointer, the CUDA ordinal and the cudaStream_t of the
// stream TensorFlow queues the op's work on (the op's device context's stream), so the worker
// library's GPU path (NCCL) makes its own stream wait for that stream: the collective reads the
// input after every producer queued before it, without a host copy and without waiting on the
// host. The handle completes once the result is on the GPU and that stream waits for it.
//
// The stream comes from stream_executor's platform-neutral interface (Stream's
// platform_specific_handle(), StreamExecutor's device_ordinal()), which TensorFlow's wheels ship
// and which needs neither CUDA's headers nor GOOGLE_CUDA: the same code compiles against the CPU
// wheel and runs with the GPU one (docs/tensorflow.md, "GPU tensors").
#pragma once

#include "hvrun/hvrun.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace stream_executor {
class Stream;
}

namespace hvrun::tensorflow_ops {

namespace tf = ::tensorflow;

struct Placement {
  Device device;                                 // cpu(), or cuda(ordinal)
  void* stream = nullptr;                        // the cudaStream_t of TensorFlow's compute stream
  stream_executor::Stream* tf_stream = nullptr;  // the same stream, as TensorFlow holds it

  bool on_gpu() const { return device.is_cuda(); }
};

// Where an argument of the running op lives: in host memory on a CPU device and for arguments
// TensorFlow keeps on the host on a GPU device (HostMemory ones, int32); else on the op's GPU.
// An error when TensorFlow gave a GPU op no CUDA stream.
Result<Placement> input_placement(tf::OpKernelContext* context, int index);
Result<Placement> output_placement(tf::OpKernelContext* context, int index);

// Copies `from` into `to` (same size and placement): memcpy on the host; on a GPU a
// device-to-device copy queued on TensorFlow's stream (the collective's stream waits for it).
absl::Status copy_tensor(const Placement& placement, const tf::Tensor& from, tf::Tensor* to);

// Output `index` from a completed handle's library-allocated result: host bytes are copied into
// the op's output; device memory becomes the output as it is (a tensor whose buffer owns the
// result, freed in stream order on TensorFlow's stream when TensorFlow releases it).
absl::Status output_from_handle(tf::OpKernelContext* context, int index, const Handle& handle);

}  // namespace hvrun::tensorflow_ops

// What hvrun's TensorFlow kernels share: dtype and shape conversion between TensorFlow tensors
// and hvrun's views (no copies; host or GPU memory, device_tensors.h), status conversion,
// CollectiveKernel, the base of the asynchronous kernels, and their registration on GPUs.
//
// Threads: ComputeAsync runs on one of TensorFlow's inter-op threads and only submits; the
// worker's background thread completes the handles and runs their on_complete callbacks, which
// only hand the rest (copying a library-allocated result into the op's output, done()) to one of
// TensorFlow's CPU worker threads. Neither side ever waits for the other.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "python/tf_ops/device_tensors.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace hvrun::tensorflow_ops {

namespace tf = ::tensorflow;

// hvrun's dtype for tensors that are reduced (arithmetic on the values).
std::optional<DataType> reduced_dtype(tf::DataType dtype);
// hvrun's dtype for tensors whose bytes are only moved (broadcast, allgather, alltoall): also
// bool (as uint8) and the 16-bit integers (as a 16-bit dtype, whose bytes travel unchanged).
std::optional<DataType> moved_dtype(tf::DataType dtype);

std::vector<int64_t> shape_of(const tf::Tensor& tensor);
// The tensor's bytes where `placement` says they are (a GPU view names TensorFlow's stream).
ConstTensorView const_view_of(const tf::Tensor& tensor, DataType dtype, const Placement& placement);
TensorView view_of(tf::Tensor& tensor, DataType dtype, const Placement& placement);

// The same code (hvrun's codes are gRPC's, as absl's are) and message: for what is not a
// collective's outcome (a topology query, an attribute).
absl::Status to_tf_status(const Status& status);

// The one mapping of a collective's outcome onto TensorFlow's error codes, as Horovod's ops
// raise them (docs/tensorflow.md, "Errors"): INVALID_ARGUMENT (refused, or metadata that differ
// between ranks) becomes FAILED_PRECONDITION; every other code stays.
absl::StatusCode collective_tf_code(StatusCode code);
absl::Status collective_tf_status(const Status& status);

// Horovod's op constants (Average 0, Sum 1, Adasum 2, Min 3, Max 4, Product 5), the values the
// ops' reduce_op attribute carries.
Result<ReduceOp> reduce_op_of_horovod_constant(int op);

// The base of every asynchronous collective kernel.
class CollectiveKernel : public tf::AsyncOpKernel {
 public:
  explicit CollectiveKernel(tf::OpKernelConstruction* context);

 protected:
  // The collective's name: the op's tensor_name attribute when set (a named eager call), else
  // the node's name (Horovod's rule), without its name scope when the op's ignore_name_scope
  // attribute says so. Every rank builds the same graph (or makes the same named eager calls),
  // so every rank has the same names.
  const std::string& tensor_name() const { return tensor_name_; }
  // The set the collective runs on: the op's process_set_id attribute (0, the global set, for
  // ops without one). Graphs fix it when they are built, so one kernel always uses one set.
  ProcessSet process_set() const { return process_set_; }

  // Runs submit(worker) with this process's worker; without one (init() not called, or after
  // shutdown()) fails the op with FAILED_PRECONDITION and calls done(). False when it failed.
  bool submit(tf::OpKernelContext* context, const DoneCallback& done,
              const std::function<void(Worker&)>& submit_with);

  // Where each input lives (device_tensors.h), or, when TensorFlow gave a GPU op no stream, the
  // op fails and done() is called (then the result is empty). An output is where its input is:
  // they have one dtype, so TensorFlow keeps both on the host or both on the GPU.
  static std::optional<std::vector<Placement>> input_placements(tf::OpKernelContext* context,
                                                                const DoneCallback& done);

  // Fails the op with `status` and calls done().
  static void fail(tf::OpKernelContext* context, const DoneCallback& done, const Status& status);

  // Once every handle completed, runs finish(first failure, or OK) on one of TensorFlow's CPU
  // worker threads; `finish` calls done(). When they have not completed within the worker's
  // operation timeout, finish runs with DEADLINE_EXCEEDED instead (and never again): the op
  // fails rather than waiting for a rank that never submits. The op's inputs and `written`
  // (outputs the collective writes into) stay alive until the handles complete, even then.
  void when_complete(tf::OpKernelContext* context, std::vector<Handle> handles,
                     std::vector<tf::Tensor> written, std::function<void(const Status&)> finish);

  // when_complete for ops whose outputs the collective writes in place: sets the status, done().
  void complete_in_place(tf::OpKernelContext* context, std::vector<Handle> handles,
                         std::vector<tf::Tensor> written, DoneCallback done);

  // when_complete for ops whose outputs are made once the collectives succeeded: produce()
  // makes them (its error fails the op); a failed collective fails the op. Then done().
  void complete_with_outputs(tf::OpKernelContext* context, std::vector<Handle> handles,
                             std::function<absl::Status()> produce, DoneCallback done);

  // Each completed handle's library-allocated result as the output of its index (host results
  // copied, GPU results handed over as they are: device_tensors.h).
  static absl::Status outputs_from_handles(tf::OpKernelContext* context,
                                           const std::vector<Handle>& handles);

  // "rank R: <what>" for errors this binding finds itself (unsupported dtypes, bad splits).
  static Status refused(const Worker& worker, const std::string& what);

 private:
  std::string tensor_name_;
  ProcessSet process_set_;
  std::atomic<int> rank_{-1};  // this process's rank, known once a submission ran
};

}  // namespace hvrun::tensorflow_ops

// Registers a kernel for TensorFlow's GPUs in builds with the CUDA data plane
// (python/tf_ops/CMakeLists.txt sets HVRUN_TF_GPU_KERNELS): elsewhere libhvrun cannot run CUDA
// tensors, and GPU tensors keep going through the CPU kernels, which TensorFlow feeds host copies.
#if HVRUN_TF_GPU_KERNELS
#define HVRUN_REGISTER_GPU_KERNEL(...) REGISTER_KERNEL_BUILDER(__VA_ARGS__)
#else
#define HVRUN_REGISTER_GPU_KERNEL(...) static_assert(true, "no GPU kernels in this build")
#endif

#include "worker_lib/backends/gloo/gloo_backend.h"

#include <cstdint>
#include <cstring>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <vector>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/transport/tcp/device.h>

#include "worker_lib/backends/gloo/descriptor_budget.h"
#include "worker_lib/backends/gloo/loop_waker.h"
#include "worker_lib/backends/gloo/mesh_bootstrap.h"
#include "worker_lib/backends/gloo/pair_abort.h"
#include "worker_lib/backends/gloo/reduce_kernels.h"
#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

// Gloo wants a non-null pointer even for empty buffers.
char g_empty_byte;
void* nonnull(void* p) { return p ? p : &g_empty_byte; }
void* nonnull(const void* p) { return p ? const_cast<void*>(p) : &g_empty_byte; }

class GlooBackend final : public Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::transport::tcp::Device> device,
              std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout,
              bool sparse)
      : device_(std::move(device)),
        context_(std::move(context)),
        timeout_(timeout),
        sparse_(sparse) {}

  ~GlooBackend() override {
    LoopWaker waker(device_.get());  // pairs and the device close without waiting for loop ticks
    context_.reset();
    device_.reset();
  }

  std::string name() const override { return "gloo"; }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    if (count == 0 || context_->size == 1) return aborted_status();
    if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
      return allreduce_half(static_cast<uint16_t*>(buffer), count, dtype, op);
    }
    return guarded("allreduce", [&] {
      switch (dtype) {
        case DataType::kUInt8: run_allreduce<uint8_t>(buffer, count, dtype, op); break;
        case DataType::kInt8: run_allreduce<int8_t>(buffer, count, dtype, op); break;
        case DataType::kInt16: run_allreduce<int16_t>(buffer, count, dtype, op); break;
        case DataType::kInt32: run_allreduce<int32_t>(buffer, count, dtype, op); break;
        case DataType::kInt64: run_allreduce<int64_t>(buffer, count, dtype, op); break;
        case DataType::kFloat32: run_allreduce<float>(buffer, count, dtype, op); break;
        case DataType::kFloat64: run_allreduce<double>(buffer, count, dtype, op); break;
        case DataType::kFloat16:
        case DataType::kBFloat16: break;  // widened above
      }
    });
  }

  Status allgatherv(const void* input, void* output,
                    std::span<const size_t> recv_bytes) override {
    HVRUN_RETURN_IF_ERROR(not_on_sparse_mesh("allgatherv"));
    size_t total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
    if (total == 0) return aborted_status();
    if (context_->size == 1) {
      std::memcpy(output, input, total);
      return Status::ok();
    }
    return guarded("allgather", [&] {
      gloo::AllgathervOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      opts.setInput(static_cast<uint8_t*>(nonnull(input)), recv_bytes[context_->rank]);
      opts.setOutput(static_cast<uint8_t*>(nonnull(output)),
                     std::vector<size_t>(recv_bytes.begin(), recv_bytes.end()));
      gloo::allgatherv(opts);
    });
  }

  Status broadcast(void* buffer, size_t bytes, int root) override {
    if (bytes == 0 || context_->size == 1) return aborted_status();
    return guarded("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      opts.setRoot(root);
      opts.setOutput(static_cast<uint8_t*>(buffer), bytes);
      gloo::broadcast(opts);
    });
  }

  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    HVRUN_RETURN_IF_ERROR(not_on_sparse_mesh("alltoallv"));
    size_t sent = std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0});
    size_t received = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
    if (context_->size == 1) {
      if (sent) std::memcpy(output, input, sent);
      return Status::ok();
    }
    return guarded("alltoall", [&] {
      gloo::AlltoallvOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      opts.setInput(static_cast<uint8_t*>(nonnull(input)),
                    std::vector<int64_t>(send_bytes.begin(), send_bytes.end()));
      opts.setOutput(static_cast<uint8_t*>(nonnull(output)),
                     std::vector<int64_t>(recv_bytes.begin(), recv_bytes.end()));
      (void)received;
      gloo::alltoallv(opts);
    });
  }

  Status barrier() override {
    if (context_->size == 1) return aborted_status();
    return guarded("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  // Signals every pair: Gloo wakes whatever waits on them with an exception and closes the
  // sockets, so peers blocked on this rank fail at once too (not only at their op timeout).
  void abort(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      if (aborted_.load()) return;
      abort_reason_ = reason;
      aborted_.store(true);
    }
    for (int peer = 0; peer < context_->size; ++peer) {
      if (peer == context_->rank) continue;
      try {
        auto& pair = context_->getPair(peer);
        if (!pair) continue;
        if (!gloo_backend::fail_pair(pair.get(), "hvrun data plane torn down: " + reason))
          pair->close();  // not TCP: at least the peer sees the connection go
      } catch (const std::exception&) {
        // The pair was never connected or is gone already: nothing blocks on it.
      }
    }
  }

 private:
  // A sparse mesh lacks the pairs these need (the hierarchical plane sends them to the mesh of
  // every rank instead).
  Status not_on_sparse_mesh(const char* what) const {
    if (!sparse_) return Status::ok();
    return internal_error(std::string("gloo ") + what + " on rank " +
                          std::to_string(context_->rank) +
                          " of a sparse mesh (pairs only with ranks 2^k apart): not supported");
  }

  template <typename T>
  void run_allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) {
    gloo::AllreduceOptions opts(context_);
    // The ring: only the neighbours' pairs, which every mesh (a sparse one too) has.
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    opts.setOutput(static_cast<T*>(buffer), count);
    opts.setReduceFunction(gloo_backend::reduce_function(dtype, op));
    gloo::allreduce(opts);
  }

  Status allreduce_half(uint16_t* data, size_t count, DataType dtype, ReduceOp op) {
    widened_.resize(count);
    bool bf16 = dtype == DataType::kBFloat16;
    for (size_t i = 0; i < count; ++i)
      widened_[i] = bf16 ? bfloat16_to_float(data[i]) : float16_to_float(data[i]);
    HVRUN_RETURN_IF_ERROR(allreduce(widened_.data(), count, DataType::kFloat32, op));
    for (size_t i = 0; i < count; ++i)
      data[i] = bf16 ? float_to_bfloat16(widened_[i]) : float_to_float16(widened_[i]);
    return Status::ok();
  }

  Status aborted_status() {
    if (!aborted_.load()) return Status::ok();
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return aborted(abort_reason_);
  }

  template <typename Fn>
  Status guarded(const char* what, Fn&& fn) {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    try {
      fn();
      return Status::ok();
    } catch (const std::exception& e) {
      // Torn down while this op ran: the reason is what the caller needs, not Gloo's words.
      HVRUN_RETURN_IF_ERROR(aborted_status());
      std::string message = std::string("gloo ") + what + " failed on rank " +
                            std::to_string(context_->rank) + " of " +
                            std::to_string(context_->size) + ": " + e.what() +
                            " (a peer may have died; check the other ranks' logs)";
      // After a failed collective the mesh is out of step; close it so that peers waiting on
      // this rank fail now instead of at their op timeout.
      abort(message);
      return internal_error(message);
    }
  }

  uint32_t next_tag() { return tag_++ & 0x7fffffffu; }

  std::shared_ptr<gloo::transport::tcp::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  bool sparse_ = false;
  uint32_t tag_ = 1;
  std::vector<float> widened_;  // reused across calls (float16/bfloat16 accumulation)
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;      // guards abort_reason_
  std::string abort_reason_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_gloo_backend(const GlooBackendOptions& options,
                                                   KeyValueStore& store) {
  const std::string setup = "Gloo data plane setup failed on rank " +
                            std::to_string(options.rank) + " (binding " + options.data_address +
                            "): ";
  const std::string hint = " — check HVRUN_DATA_ADDR and that every rank started";
  const auto peers =
      static_cast<int>(mesh_peers(options.rank, options.size, options.sparse).size());
  if (Status room = ensure_descriptors_for_mesh(options.rank, peers); !room.is_ok())
    return Status(room.code(), setup + room.message());
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.data_address;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = connect_mesh({.rank = options.rank,
                                 .size = options.size,
                                 .key_prefix = options.store_prefix,
                                 .timeout = options.connect_timeout,
                                 .sparse = options.sparse},
                                device, store);
    if (!context.is_ok()) return unavailable(setup + context.status().message() + hint);
    // Connecting returns once this rank's pairs are connected, not its peers': a rank that
    // left at once (a process set it has no more work in) would close sockets a peer is still
    // completing, failing that peer's setup. Past a barrier every rank has finished connecting.
    if (options.size > 1) {
      gloo::BarrierOptions barrier(*context);
      barrier.setTimeout(options.connect_timeout);
      gloo::barrier(barrier);
    }
    return std::unique_ptr<Backend>(new GlooBackend(
        std::dynamic_pointer_cast<gloo::transport::tcp::Device>(device), *context,
        options.timeout, options.sparse));
  } catch (const std::exception& e) {
    return unavailable(setup + e.what() + hint);
  }
}

}  // namespace hvrun::detail

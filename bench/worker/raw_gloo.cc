#include "bench/worker/raw_gloo.h"

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

namespace hvrun::bench {

RawGloo::RawGloo(std::shared_ptr<gloo::Context> context, int rank, int size,
                 std::chrono::milliseconds timeout)
    : context_(std::move(context)), rank_(rank), size_(size), timeout_(timeout) {}

bool RawGloo::options_from_environment(RawGlooOptions* options, std::string* error) {
  const char* rank = std::getenv("HVRUN_RANK");
  const char* size = std::getenv("HVRUN_SIZE");
  const char* job = std::getenv("HVRUN_JOB_ID");
  if (!rank || !size || !job) {
    *error = "raw Gloo needs HVRUN_RANK, HVRUN_SIZE and HVRUN_JOB_ID: start it with hvrun";
    return false;
  }
  options->rank = std::atoi(rank);
  options->size = std::atoi(size);
  if (const char* addr = std::getenv("HVRUN_DATA_ADDR"); addr && *addr)
    options->data_address = addr;
  const char* tmp = std::getenv("TMPDIR");
  options->store_dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/hvrun-raw-gloo-" + job;
  return true;
}

std::unique_ptr<RawGloo> RawGloo::connect(const RawGlooOptions& options, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(options.store_dir, ec);  // every rank; EEXIST is fine
  if (!std::filesystem::is_directory(options.store_dir)) {
    *error = "raw Gloo: cannot create the rendezvous directory " + options.store_dir + ": " +
             ec.message();
    return nullptr;
  }
  std::unique_ptr<RawGloo> raw;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.data_address;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    gloo::rendezvous::FileStore store(options.store_dir);
    context->connectFullMesh(store, device);
    raw.reset(new RawGloo(context, options.rank, options.size, options.timeout));
    // Every rank has read the store once all reach this barrier: rank 0 may remove it.
    raw->barrier();
  } catch (const std::exception& e) {
    *error = "raw Gloo: rank " + std::to_string(options.rank) + " of " +
             std::to_string(options.size) + " could not connect through " + options.store_dir +
             " (binding " + options.data_address + "): " + e.what();
    return nullptr;
  }
  if (options.rank == 0) std::filesystem::remove_all(options.store_dir, ec);
  return raw;
}

void RawGloo::allreduce_sum(float* data, size_t count) {
  gloo::AllreduceOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  opts.setOutput(data, count);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

void RawGloo::allgather(const float* input, float* output, size_t count_per_rank) {
  gloo::AllgatherOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  opts.setInput(const_cast<float*>(input), count_per_rank);
  opts.setOutput(output, count_per_rank * static_cast<size_t>(size_));
  gloo::allgather(opts);
}

void RawGloo::broadcast(float* data, size_t count, int root) {
  gloo::BroadcastOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  opts.setRoot(root);
  opts.setOutput(data, count);
  gloo::broadcast(opts);
}

void RawGloo::barrier() {
  gloo::BarrierOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  gloo::barrier(opts);
}

}  // namespace hvrun::bench

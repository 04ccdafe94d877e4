// One collective a caller submitted, from submission until its handle completes. Created by the
// API thread, then owned by the runtime (in-flight table, guarded by WorkState::mutex) until the
// background thread takes it out to execute it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hvrun.pb.h"
#include "hvrun/types.h"
#include "worker_lib/handle_state.h"

namespace hvrun::detail {

struct CacheEntry;
struct InFlightSlot;

struct PendingOp {
  v1::CollectiveOp op = v1::COLLECTIVE_OP_UNSPECIFIED;
  DataType dtype = DataType::kUInt8;
  std::vector<int64_t> shape;
  int root_rank = 0;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> splits;
  uint64_t group_id = 0;
  uint32_t group_size = 0;
  uint32_t process_set = 0;     // the set it runs on (RequestBatch.process_set_id); 0 = global

  Device device;                // where input/output live (CUDA: device pointers)
  void* stream = nullptr;       // CUDA: the caller's stream the data is ready on
  const void* input = nullptr;  // caller's buffer (allreduce, allgather, alltoall, reducescatter)
  void* output = nullptr;       // caller's buffer (allreduce, broadcast)
  std::shared_ptr<HandleState> handle;
  uint64_t flight_sequence = 0;  // its record in the flight recorder; 0 = not recorded
  // The runtime's shortcuts past two lookups by name per op and step (both under
  // WorkState::mutex). The request-cache entry of its name, once found: entries are rewritten in
  // place, never erased, and an op reused for the next submission of its name keeps it. Its
  // in-flight table slot while it is in flight, else null.
  const CacheEntry* cache_entry = nullptr;
  InFlightSlot* in_flight_slot = nullptr;

  // A new op whose handle carries `name`, every other field at its default.
  static std::shared_ptr<PendingOp> named(std::string name) {
    auto op = std::make_shared<PendingOp>();
    op->handle = std::make_shared<HandleState>(std::move(name));
    return op;
  }

  const std::string& name() const { return handle->name; }

  // The request with full metadata (cache_id 0).
  v1::TensorRequest to_request() const;
  // Everything the coordinator's cache entry depends on, as bytes: equal signatures may reuse
  // a cache id.
  std::string cache_signature() const;
};

}  // namespace hvrun::detail

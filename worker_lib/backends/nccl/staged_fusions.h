// The fused layouts and staged pack/unpack tables of a job's recent fused responses, kept from
// step to step: a training step reduces the same tensors from the same memory every step, so the
// GPU executor finds its last step's tables here and launches them by handle (DevicePlane::
// copy_staged) instead of building, splitting and uploading them again.
//
// A table holds device pointers, so an entry stands only for exactly the tensors it was staged
// for: the same sources, destinations and counts, and the same fusion buffer (it moves when it
// grows). Anything else stages new tables; the least recently used entry goes when kKept are
// kept. Threads: the GPU executor's (the executor lock's holder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker_lib/backends/nccl/device_plane.h"
#include "worker_lib/backends/nccl/segment_table.h"

namespace hvrun::detail::cuda {

// What a fused response's tables are made of on this rank: tensor i's counts[i] elements from
// sources[i] (nullptr: joined, neutral values) into the fusion buffer, and its unpack_counts[i]
// elements from first[i] into its slot out to destinations[i] (nullptr: skipped).
struct FusionTensors {
  DataType dtype = DataType::kFloat32;
  std::vector<const void*> sources;
  std::vector<uint64_t> counts;
  std::vector<void*> destinations;
  std::vector<uint64_t> unpack_counts;
  std::vector<uint64_t> first;  // empty: every tensor from 0
  bool operator==(const FusionTensors&) const = default;
  void clear();
};

struct StagedFusion {
  FusionTensors tensors;
  FusedLayout layout;
  void* fusion = nullptr;  // the fusion buffer the tables point into
  uint64_t pack = 0;       // staged tables (DevicePlane::stage_segments)
  uint64_t unpack = 0;
};

class StagedFusions {
 public:
  static constexpr size_t kKept = 16;

  // The staged fusion of `tensors` on `plane`: a kept one when it matches and the fusion buffer
  // is where it was, else one staged now.
  Result<const StagedFusion*> get(DevicePlane& plane, const FusionTensors& tensors);
  // Releases every kept table (a new plane, or the plane's end).
  void release_all(DevicePlane& plane);
  // How many tables were staged so far (tests: a steady step stages none).
  uint64_t staged() const { return staged_; }

 private:
  static void release(DevicePlane& plane, const StagedFusion& s);
  std::vector<StagedFusion> kept_;  // the most recently used last
  uint64_t staged_ = 0;
};

}  // namespace hvrun::detail::cuda

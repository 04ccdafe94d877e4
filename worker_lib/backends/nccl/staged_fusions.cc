#include "worker_lib/backends/nccl/staged_fusions.h"

#include <algorithm>

namespace hvrun::detail::cuda {

void FusionTensors::clear() {
  sources.clear();
  counts.clear();
  destinations.clear();
  unpack_counts.clear();
  first.clear();
}

void StagedFusions::release(DevicePlane& plane, const StagedFusion& s) {
  plane.release_staged(s.pack);
  plane.release_staged(s.unpack);
}

Result<const StagedFusion*> StagedFusions::get(DevicePlane& plane, const FusionTensors& tensors) {
  const size_t esize = dtype_size(tensors.dtype);
  auto kept = std::find_if(kept_.begin(), kept_.end(),
                           [&](const StagedFusion& s) { return s.tensors == tensors; });
  if (kept != kept_.end()) {
    HVRUN_ASSIGN_OR_RETURN(void* fusion,
                           plane.fusion_buffer(std::max<uint64_t>(kept->layout.total, 1) * esize));
    if (fusion == kept->fusion) {
      std::rotate(kept, kept + 1, kept_.end());
      return &kept_.back();
    }
    release(plane, *kept);
    kept_.erase(kept);
  }
  StagedFusion s;
  s.tensors = tensors;
  s.layout = fused_layout(tensors.counts, esize);
  HVRUN_ASSIGN_OR_RETURN(s.fusion, plane.fusion_buffer(std::max<uint64_t>(s.layout.total, 1) * esize));
  HVRUN_ASSIGN_OR_RETURN(
      s.pack, plane.stage_segments(
                  pack_segments(tensors.sources, tensors.counts, s.fusion, s.layout, esize),
                  tensors.dtype));
  auto unpack = plane.stage_segments(unpack_segments(tensors.destinations, tensors.unpack_counts,
                                                     s.fusion, s.layout, esize, tensors.first),
                                     tensors.dtype);
  if (!unpack.is_ok()) {
    plane.release_staged(s.pack);
    return unpack.status();
  }
  s.unpack = *unpack;
  staged_ += 2;
  if (kept_.size() == kKept) {
    release(plane, kept_.front());
    kept_.erase(kept_.begin());
  }
  kept_.push_back(std::move(s));
  return &kept_.back();
}

void StagedFusions::release_all(DevicePlane& plane) {
  for (const StagedFusion& s : kept_) release(plane, s);
  kept_.clear();
}

}  // namespace hvrun::detail::cuda

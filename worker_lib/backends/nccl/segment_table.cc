#include "worker_lib/backends/nccl/segment_table.h"

#include <algorithm>
#include <cassert>

namespace hvrun::detail::cuda {
namespace {

const std::byte* at(const void* base, size_t bytes) {
  return static_cast<const std::byte*>(base) + bytes;
}
std::byte* at(void* base, size_t bytes) { return static_cast<std::byte*>(base) + bytes; }

}  // namespace

std::vector<Segment> split_segments(std::span<const Segment> segments, uint64_t max_count,
                                    size_t element_size) {
  assert(max_count > 0);
  std::vector<Segment> chunks;
  for (const Segment& s : segments) {
    for (uint64_t done = 0; done < s.count; done += max_count) {
      const size_t skip = static_cast<size_t>(done) * element_size;
      chunks.push_back({s.src ? at(s.src, skip) : nullptr, at(s.dst, skip),
                        std::min(max_count, s.count - done)});
    }
  }
  return chunks;
}

FusedLayout fused_layout(std::span<const uint64_t> counts, size_t element_size) {
  assert(element_size > 0);
  // Alignment in elements; every dtype size divides 16.
  const uint64_t align = kFusionAlignmentBytes / element_size;
  FusedLayout layout;
  for (uint64_t n : counts) {
    layout.total = (layout.total + align - 1) / align * align;
    layout.offsets.push_back(layout.total);
    layout.total += n;
  }
  return layout;
}

std::vector<Segment> pack_segments(std::span<const void* const> sources,
                                   std::span<const uint64_t> counts, void* fusion,
                                   const FusedLayout& layout, size_t element_size) {
  std::vector<Segment> segments;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    segments.push_back({sources[i], at(fusion, layout.offsets[i] * element_size), counts[i]});
  }
  return segments;
}

std::vector<Segment> unpack_segments(std::span<void* const> destinations,
                                     std::span<const uint64_t> counts, const void* fusion,
                                     const FusedLayout& layout, size_t element_size,
                                     std::span<const uint64_t> first) {
  std::vector<Segment> segments;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0 || destinations[i] == nullptr) continue;
    uint64_t start = layout.offsets[i] + (first.empty() ? 0 : first[i]);
    segments.push_back({at(fusion, start * element_size), destinations[i], counts[i]});
  }
  return segments;
}

AllgatherLayout allgather_layout(const std::vector<std::vector<int64_t>>& first_dims,
                                 std::span<const size_t> row_bytes, int size) {
  AllgatherLayout layout;
  layout.block_offset.assign(static_cast<size_t>(size), 0);
  layout.block_bytes.assign(static_cast<size_t>(size), 0);
  layout.tensor_offset.assign(first_dims.size(), std::vector<size_t>(static_cast<size_t>(size), 0));
  for (size_t k = 0; k < static_cast<size_t>(size); ++k) {
    layout.block_offset[k] = layout.total_bytes;
    for (size_t i = 0; i < first_dims.size(); ++i) {
      layout.tensor_offset[i][k] = layout.total_bytes;
      layout.total_bytes += static_cast<size_t>(first_dims[i][k]) * row_bytes[i];
    }
    layout.block_bytes[k] = layout.total_bytes - layout.block_offset[k];
  }
  return layout;
}

std::vector<Segment> allgather_pack_segments(std::span<const void* const> sources,
                                             const std::vector<std::vector<int64_t>>& first_dims,
                                             std::span<const size_t> row_bytes,
                                             const AllgatherLayout& layout, int rank,
                                             void* buffer, size_t element_size) {
  std::vector<Segment> segments;
  const size_t k = static_cast<size_t>(rank);
  for (size_t i = 0; i < first_dims.size(); ++i) {
    size_t bytes = static_cast<size_t>(first_dims[i][k]) * row_bytes[i];
    if (bytes == 0) continue;
    // A joined rank contributes no rows; should the plan still list some, send zeros.
    segments.push_back({sources[i], at(buffer, layout.tensor_offset[i][k]), bytes / element_size});
  }
  return segments;
}

std::vector<Segment> allgather_unpack_segments(std::span<void* const> outputs,
                                               const std::vector<std::vector<int64_t>>& first_dims,
                                               std::span<const size_t> row_bytes,
                                               const AllgatherLayout& layout, const void* buffer,
                                               size_t element_size) {
  std::vector<Segment> segments;
  for (size_t i = 0; i < first_dims.size(); ++i) {
    if (outputs[i] == nullptr) continue;
    size_t pos = 0;
    for (size_t k = 0; k < first_dims[i].size(); ++k) {
      size_t bytes = static_cast<size_t>(first_dims[i][k]) * row_bytes[i];
      if (bytes) segments.push_back({at(buffer, layout.tensor_offset[i][k]), at(outputs[i], pos),
                                     bytes / element_size});
      pos += bytes;
    }
  }
  return segments;
}

}  // namespace hvrun::detail::cuda

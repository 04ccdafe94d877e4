// Where each tensor of a fused GPU response lives in the device fusion buffer, and the segment
// tables (src, dst, count) that the pack and unpack kernels run in one launch each.
//
// Pure arithmetic on pointers and sizes, no CUDA: unit-tested on the CPU
// (tests/worker/nccl_segment_table_test.cc). Every rank computes the same layout from the same
// response, which is what lets one NCCL call move the whole fused buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail::cuda {

// Each tensor starts on a 16-byte boundary of the fusion buffer so the kernels can copy with
// 16-byte vectors; the gaps are reduced too (harmless, never read back).
inline constexpr size_t kFusionAlignmentBytes = 16;

// The pack/unpack kernels give each block one chunk of at most this many bytes, so a table
// mixing huge and tiny tensors keeps every SM busy.
inline constexpr uint64_t kChunkBytes = 64 * 1024;

// `segments` cut into pieces of at most `max_count` elements of `element_size` bytes (order
// kept, empty segments dropped; a null src stays null).
std::vector<Segment> split_segments(std::span<const Segment> segments, uint64_t max_count,
                                    size_t element_size);

struct FusedLayout {
  std::vector<uint64_t> offsets;  // element offset of tensor i
  uint64_t total = 0;             // elements, including alignment gaps
};

FusedLayout fused_layout(std::span<const uint64_t> counts, size_t element_size);

// Tensor i's `counts[i]` elements from sources[i] (nullptr: this rank joined -> neutral value)
// into the fusion buffer.
std::vector<Segment> pack_segments(std::span<const void* const> sources,
                                   std::span<const uint64_t> counts, void* fusion,
                                   const FusedLayout& layout, size_t element_size);

// Tensor i's elements starting `first[i]` elements into its fused slot, `counts[i]` of them, to
// destinations[i] (nullptr: skipped, the rank has no tensor). `first` empty = all from 0.
std::vector<Segment> unpack_segments(std::span<void* const> destinations,
                                     std::span<const uint64_t> counts, const void* fusion,
                                     const FusedLayout& layout, size_t element_size,
                                     std::span<const uint64_t> first = {});

// Allgather of several tensors in one buffer: rank k's block holds its rows of every tensor,
// back to back, and blocks follow each other in rank order (what ncclAllGather produces).
struct AllgatherLayout {
  std::vector<size_t> block_offset;                // bytes, per rank
  std::vector<size_t> block_bytes;                 // bytes, per rank
  std::vector<std::vector<size_t>> tensor_offset;  // [tensor][rank] bytes into the buffer
  size_t total_bytes = 0;
};

// first_dims[i][k]: rows of tensor i on rank k; row_bytes[i]: bytes per row of tensor i.
AllgatherLayout allgather_layout(const std::vector<std::vector<int64_t>>& first_dims,
                                 std::span<const size_t> row_bytes, int size);

// This rank's tensors into its own block (sources[i] nullptr: joined, zero rows expected).
std::vector<Segment> allgather_pack_segments(std::span<const void* const> sources,
                                             const std::vector<std::vector<int64_t>>& first_dims,
                                             std::span<const size_t> row_bytes,
                                             const AllgatherLayout& layout, int rank,
                                             void* buffer, size_t element_size);

// Every rank's rows of tensor i, in rank order, into outputs[i] (nullptr: skipped).
std::vector<Segment> allgather_unpack_segments(std::span<void* const> outputs,
                                               const std::vector<std::vector<int64_t>>& first_dims,
                                               std::span<const size_t> row_bytes,
                                               const AllgatherLayout& layout, const void* buffer,
                                               size_t element_size);

}  // namespace hvrun::detail::cuda

// The GPU communicator across an elastic reset: what one membership's GpuExecutor hands to the
// next in the same process, and how the ranks of the new membership agree to shrink it or make
// a new one.
//
// An elastic reset ends the Worker (and its GpuExecutor) and starts another, but NCCL's shrink
// makes the survivors' communicator from the old one, which must therefore outlive the Worker.
// So the old executor, ended by a membership change, revokes its plane's communicator and parks
// the plane here; the next executor of this process takes it at its start. The slot is
// process-wide, as the loaded plugin is: one elastic job per process, and a Worker at a time.
//
// At the new membership's first CUDA response every rank posts what it holds (held_text());
// rank 0 reads them all and decides (choose_rebuild()): a shrink when every rank holds the same
// old communicator, in its old order (NCCL's rank order after a shrink), so that ranks only
// left; otherwise a new communicator from a new unique id, with why.
//
// Threads: carry/take from the thread that ends or builds a Worker.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail {

// Who this process is in the communicator its plane holds.
struct CommunicatorLineage {
  // The same on every member: from rank 0's unique id (init) or the parent's tag and the
  // excluded ranks (shrink). Empty: no communicator.
  std::string tag;
  int rank = -1;
  int size = 0;
};

// 16 hex digits every member computes alike: from the unique id the communicator was made with,
// or from the parent's tag (or id) and the old ranks a shrink excluded.
std::string lineage_tag_of_init(const std::string& unique_id);
std::string lineage_tag_of_shrink(const std::string& parent_tag, std::span<const int> excluded);

struct CarriedCommunicator {
  std::unique_ptr<cuda::DevicePlane> plane;  // revoked; null when none could be kept
  CommunicatorLineage lineage;
  std::string why_not;                       // plane null: why ("this NCCL has no ncclCommShrink")
};

// Parks what the ended executor kept (replacing anything parked before).
void carry_communicator(CarriedCommunicator carried);
// What the last membership's executor parked in this process, if anything (once).
std::optional<CarriedCommunicator> take_carried_communicator();

// What a rank posts for rank 0: its lineage, or that it holds none and why; empty when it holds
// none and has no why (it never had one in this job: a first start, or it joined).
std::string held_text(const CommunicatorLineage& lineage, const std::string& why_not);

struct RebuildChoice {
  bool shrink = false;
  std::vector<int> excluded;  // shrink: the old ranks that left, ascending
  std::string how;            // for the "communicator ready" line: "shrink of ...", "init ..."
};

// Rank 0's decision from every rank's held_text(), in new rank order.
RebuildChoice choose_rebuild(std::span<const std::string> held_by_rank);

// The answer rank 0 posts for a shrink, and its reading ("shrink:2,5").
std::string shrink_answer(std::span<const int> excluded);
std::optional<std::vector<int>> parse_shrink_answer(const std::string& answer);

}  // namespace hvrun::detail

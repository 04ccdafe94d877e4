// The process sets this rank knows, and for the sets it belongs to, their own data planes: a
// CPU backend (the same choice as the job's, among the set's members: shared memory within a
// host, Gloo across) and a GPU executor (its own NCCL communicator), behind a PlanExecutor
// numbered as the set numbers its ranks (ascending job ranks -> 0..k-1).
//
// Every rank learns of a set when it executes the plan that added it (the same plan on every
// rank), members connect their planes there, together, and non-members only note the members.
// A removal drops them the same way. So at any point of the plan order every rank agrees on
// which sets exist.
//
// Threads: add/remove/executor under the runtime's executor lock (the plan runner); members,
// ids, removing and abort from any thread (a mutex of its own, after WorkState's in work_state.h's
// order; held while aborting the sets' executors, whose own locks nest inside it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/backends/nccl/gpu_executor.h"
#include "worker_lib/execution/plan_executor.h"
#include "worker_lib/kv_store.h"
#include "worker_lib/runtime/prefixed_store.h"
#include "worker_lib/telemetry/phase_observer.h"

namespace hvrun::detail {

// A set's members and this rank's place among them.
struct ProcessSetMembers {
  std::vector<int> ranks;  // job ranks, ascending
  int position = -1;       // this rank's index in `ranks`; -1 = not a member
  bool includes_me() const { return position >= 0; }
  int size() const { return static_cast<int>(ranks.size()); }
  std::string ranks_text() const;  // "0, 2, 3"
};

class ProcessSetPlanes {
 public:
  // What a set's planes are made from: the job's.
  struct Job {
    int rank = 0;
    int size = 1;
    int local_rank = 0;
    std::vector<std::string> hosts;  // every job rank's host, by rank
    std::string job_id;
    const Config* config = nullptr;  // outlives this object
    KeyValueStore* store = nullptr;  // the coordinator's; outlives this object
    std::function<Status(Status)> explain_failure;
    telemetry::PhaseObserver* observer = nullptr;
    FlightRecorder* recorder = nullptr;  // the rank's flight recorder, or null (off)
    bool gloo_only = false;  // the placement is unknown: Gloo, as the job's plane then
  };
  explicit ProcessSetPlanes(Job job);
  ~ProcessSetPlanes();

  // Any thread: the set's members (id 0: every rank), or nullopt when it does not exist here.
  std::optional<ProcessSetMembers> members(uint32_t id) const;
  std::vector<uint32_t> ids() const;  // ascending, 0 first
  // Any thread: whether `plan` has a response this rank runs with its peers (of the global set
  // or of a set it is in, without an error); a plan of other sets only passes this rank by, and
  // an error response (e.g. "rank 1 left the job", for a peer's later call) no rank runs on a
  // data plane. Shutdown tears the data planes down when this rank skips such a plan.
  bool takes_part_in(const v1::Plan& plan) const;

  // Executor lock held. Records set `id`; a member connects its data planes with the others
  // (blocks until they did, bounded by the start timeout). An error leaves the set unknown.
  Status add(uint32_t id, std::vector<int> ranks);
  void remove(uint32_t id);
  // Executor lock held: the executor of set `id` (not 0) when this rank is a member, else null.
  PlanExecutor* executor(uint32_t id);

  // Any thread: this rank asked to remove set `id` (its own collectives on it are refused from
  // now on), or the removal failed (they are allowed again).
  void set_removing(uint32_t id, bool removing);
  bool removing(uint32_t id) const;

  // Any thread: every set's data planes fail what runs now and everything later.
  void abort(const std::string& reason);
  void set_device_allocator(DeviceAllocator allocator);

 private:
  struct Set {
    ProcessSetMembers members;
    // Members only, in the order they are made (and the reverse of their destruction).
    std::unique_ptr<PrefixedStore> store;    // the set's keys, for the planes' bootstrap
    std::unique_ptr<Backend> backend;
    std::unique_ptr<PlanExecutor> executor;
    GpuExecutor* gpu = nullptr;              // executor's GPU executor
    bool removing = false;                   // this rank submitted its removal
  };
  Result<std::unique_ptr<Set>> connect(uint32_t id, ProcessSetMembers members);

  Job job_;
  mutable std::mutex mutex_;
  std::map<uint32_t, std::unique_ptr<Set>> sets_;  // guarded by mutex_ (not the global set)
  std::optional<std::string> aborted_;             // guarded by mutex_
  DeviceAllocator allocator_;                      // guarded by mutex_
};

}  // namespace hvrun::detail

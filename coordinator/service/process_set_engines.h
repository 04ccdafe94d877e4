// The job's process sets, one NegotiationEngine each: the global set (id 0, every rank) and the
// sets the ranks added (Horovod's add_process_set). Each set negotiates on its own, among its
// members numbered 0..k-1 in ascending order of their job rank: its own cache ids, fusion,
// cycle time and stalls, so a set's collectives never wait for another set's.
//
// Sets come and go by collectives on the global set, which every rank submits in the same order:
// COLLECTIVE_OP_PROCESS_SET_ADD (the members in `splits`) and COLLECTIVE_OP_PROCESS_SET_REMOVE
// (the id in `root_rank`). When the global engine plans one, take_plan() applies it there and
// then: the new set's engine exists before any rank can learn its id (from that very plan), and
// a removed set's id is refused from then on. Ids are never reused.
//
// Every plan goes to every rank: a rank executes the responses of the sets it belongs to and
// skips the others. So all ranks see one order of every set's collectives, and a rank that is
// in two sets runs their collectives in that order: two sets that share ranks cannot deadlock.
//
// Threads: not thread-safe; the negotiation loop calls it under its engine lock.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/engine/negotiation_engine.h"

namespace hvrun::coordinator::service {

class ProcessSetEngines {
 public:
  using TimePoint = NegotiationEngine::TimePoint;

  // `global`: the options of the global set (world_size = every rank); each added set gets the
  // same options with its own size.
  explicit ProcessSetEngines(EngineOptions global);

  // Hands `batch` to the engine of its set (RequestBatch.process_set_id), with the rank
  // numbered as that set numbers it. An error Status: the rank broke the protocol (unknown or
  // removed set, a rank outside the set, or what NegotiationEngine::submit refuses).
  Status submit(int rank, const v1::RequestBatch& batch, TimePoint now);
  // `rank` left cleanly: every set it belongs to stops waiting for it.
  void rank_departed(int rank, TimePoint now);
  // Every set's collectives that failed because a rank left (NegotiationEngine::
  // take_departure_failures), the message naming the set as its error responses do.
  std::vector<DepartureFailure> take_departure_failures();
  // Every set's names used with different ops (NegotiationEngine::fail_op_mismatches).
  std::vector<std::string> fail_op_mismatches(TimePoint now);

  // The next plan due at `now` from any set, with the job's next seq, each response marked with
  // its set (Response.process_set_id); set additions and removals in it are applied.
  std::optional<v1::Plan> take_plan(TimePoint now);
  std::optional<TimePoint> next_deadline() const;
  // Every set's stalled tensors (ranks as the job numbers them).
  std::vector<StalledTensor> stalled_tensors(TimePoint now,
                                             NegotiationEngine::Clock::duration older_than) const;

  size_t set_count() const { return sets_.size(); }

 private:
  struct Set {
    std::vector<int> members;   // job ranks, ascending
    std::vector<int> position;  // job rank -> rank in this set, -1 when not a member
    std::unique_ptr<NegotiationEngine> engine;
  };

  Set make_set(uint32_t id, std::vector<int> members) const;
  // A planned PROCESS_SET_ADD / _REMOVE of the global set: applies it, or turns the response
  // into an error every rank gets (bad members, an unknown set, collectives still in flight).
  void apply_membership(v1::Response& response);
  std::string check_members(const std::vector<int>& members) const;

  EngineOptions global_;
  std::map<uint32_t, Set> sets_;  // by id; 0 = the global set
  uint32_t next_id_ = 1;
  uint64_t next_seq_ = 1;
};

}  // namespace hvrun::coordinator::service

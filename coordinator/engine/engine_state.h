// The engine's internal state, shared by the files that implement NegotiationEngine:
// negotiation_engine.cc (submissions, readiness, join) and plan_builder.cc (fusion, responses,
// cache updates). Not part of the coordinator's interface.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/engine/negotiation_engine.h"
#include "coordinator/engine/tensor_meta.h"
#include "proto/fusion_packing.h"

namespace hvrun::coordinator {

namespace engine {

// Allreduces (and allgathers) with an equal key may share one fused response.
using hvrun::FusionKey;

// One name in flight: which ranks submitted it and what each sent.
struct PendingTensor {
  std::string name;
  uint32_t cache_id = 0;         // the cache entry owning this slot, 0 for uncached names
  bool active = false;           // someone submitted it and no plan carried it yet
  size_t active_index = 0;       // position in State::active
  uint64_t arrival = 0;          // order of first submission: the fusion and plan order
  NegotiationEngine::TimePoint first_time{};  // when the first rank submitted it

  const TensorMeta* reference = nullptr;  // the first submission's metadata
  TensorMeta owned_reference;             // storage when that came in full
  bool reference_from_cache = false;      // reference points at the cache entry's metadata
  struct Variant {
    TensorMeta meta;
    std::vector<int> ranks;
  };
  std::vector<Variant> disagreements;     // metadata differing from the reference, and who sent it
  std::string invalid;                    // non-empty: can never run (message says why)

  std::vector<uint64_t> submitted;        // bitset over ranks
  int count = 0;
  std::vector<int64_t> first_dims;        // allgather / alltoall: each rank's first dimension
  std::vector<std::vector<int64_t>> splits;  // alltoall: each rank's splits

  int fusion_key = -1;                    // index into State::fusion_keys; -1 = never fused
  bool ready = false;
  NegotiationEngine::TimePoint ready_time{};
  std::vector<int> joined_at_ready;       // joined ranks that did not submit it

  bool failed() const { return !invalid.empty() || !disagreements.empty(); }
  bool grouped() const { return reference->group_id != 0; }
  bool has_rank(int rank) const { return (submitted[rank >> 6] >> (rank & 63)) & 1u; }
};

struct CacheEntry {
  std::string name;
  TensorMeta meta;                  // as negotiated last time
  std::vector<int64_t> first_dims;  // allgather: each rank's first dimension last time
  int fusion_key = -1;
  std::unique_ptr<PendingTensor> slot;  // reused every time this name is in flight
};

}  // namespace engine

struct NegotiationEngine::State {
  EngineOptions options;
  size_t bitset_words = 0;

  std::deque<engine::CacheEntry> cache;  // id - 1 -> entry; a deque keeps entries in place
  std::vector<engine::PendingTensor*> cache_slots;              // id - 1 -> the entry's slot
  std::unordered_map<std::string, uint32_t> cache_id_by_name;
  std::unordered_map<std::string, std::unique_ptr<engine::PendingTensor>> uncached;

  std::vector<engine::PendingTensor*> active;  // every active tensor, for scans (join, departure)
  std::vector<engine::PendingTensor*> ready;   // ready, not yet in a plan, in order of readiness
  uint64_t next_arrival = 0;

  std::vector<engine::FusionKey> fusion_keys;
  std::vector<int> not_ready_by_key;           // active, not ready tensors per fusion key

  std::vector<v1::Response> immediate;         // duplicate errors: first in the next plan
  std::optional<v1::Response> join_done;       // every rank joined: last in the next plan

  std::vector<uint8_t> joined;                 // per rank
  int joined_count = 0;
  std::vector<uint8_t> departed;               // per rank: left cleanly
  bool any_departed = false;
  std::vector<NegotiationEngine::TimePoint> last_submission;  // per rank: its latest batch
  std::vector<DepartureFailure> departure_failures;  // not yet taken

  uint64_t next_seq = 1;

  // How messages name engine rank `rank` (EngineOptions::rank_names).
  int rank_name(int rank) const {
    return options.rank_names.empty() ? rank : options.rank_names[static_cast<size_t>(rank)];
  }
  std::vector<int> rank_names(std::vector<int> ranks) const {
    for (int& r : ranks) r = rank_name(r);
    return ranks;
  }

  // negotiation_engine.cc
  engine::PendingTensor& slot_for_name(const std::string& name);
  void activate(engine::PendingTensor& tensor, NegotiationEngine::TimePoint now);
  void check_ready(engine::PendingTensor& tensor, NegotiationEngine::TimePoint now);
  void mark_ready(engine::PendingTensor& tensor, NegotiationEngine::TimePoint now);
  int fusion_key_for(const engine::TensorMeta& meta);
  void release(engine::PendingTensor& tensor);

  // plan_builder.cc
  std::optional<v1::Plan> build_plan(NegotiationEngine::TimePoint now);
};

}  // namespace hvrun::coordinator

// Submissions, readiness, join and departure (see negotiation_engine.h for the protocol).
#include "coordinator/engine/negotiation_engine.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <utility>

#include "coordinator/engine/engine_state.h"

namespace hvrun::coordinator {

using engine::PendingTensor;
using engine::TensorMeta;
using TimePoint = NegotiationEngine::TimePoint;

namespace {

v1::Response rank_error(const std::string& name, v1::CollectiveOp op, int rank,
                        std::string message) {
  v1::Response response;
  response.set_op(op);
  response.add_tensors()->set_name(name);
  response.set_error(std::move(message));
  response.add_error_ranks(rank);
  return response;
}

const std::string kNoProblem;

std::string duplicate_message(int rank, const std::string& name) {
  return "rank " + std::to_string(rank) + " submitted tensor '" + name +
         "' again while its earlier submission is still in flight; wait for the first to "
         "complete, or give each in-flight tensor its own name";
}

// A ready tensor lacks only ranks that joined (or left): one of them submitting it now sent it
// after its join(), which the API forbids; the others' result is decided without it.
std::string after_join_message(int rank, const std::string& name) {
  return "rank " + std::to_string(rank) + " submitted tensor '" + name +
         "' after it called join(); the other ranks already reduced it without this rank. "
         "Submit nothing between join() and its completion";
}

// Checks what a single rank's submission can get wrong on its own; "" when fine.
std::string check_alone(const TensorMeta& meta, const std::string& name, int rank,
                        int world_size) {
  // Built only for a message: this runs for every full request of every rank.
  auto who = [&] {
    return "rank " + std::to_string(rank) + " submitted " + std::string(engine::op_name(meta.op)) +
           " '" + name + "'";
  };
  if (meta.op == v1::COLLECTIVE_OP_BROADCAST &&
      (meta.root_rank < 0 || meta.root_rank >= world_size)) {
    return who() + " with root rank " + std::to_string(meta.root_rank) + ", but the job has ranks 0-" +
           std::to_string(world_size - 1);
  }
  if ((meta.op == v1::COLLECTIVE_OP_ALLGATHER || meta.op == v1::COLLECTIVE_OP_ALLTOALL) &&
      meta.shape.empty()) {
    return who() + " as a scalar; " + std::string(engine::op_name(meta.op)) +
           " needs at least one dimension";
  }
  if (meta.op == v1::COLLECTIVE_OP_ALLTOALL && !meta.splits.empty()) {
    const int64_t sum = std::accumulate(meta.splits.begin(), meta.splits.end(), int64_t{0});
    if (static_cast<int>(meta.splits.size()) != world_size || sum != meta.shape[0]) {
      return who() + " with " + std::to_string(meta.splits.size()) + " splits summing to " +
             std::to_string(sum) + "; it needs one split per rank (" +
             std::to_string(world_size) + ") summing to the first dimension (" +
             std::to_string(meta.shape[0]) + ")";
    }
  }
  for (int64_t dim : meta.shape) {
    if (dim < 0) return who() + " with a negative dimension " + engine::describe(meta);
  }
  return {};
}

}  // namespace

NegotiationEngine::NegotiationEngine(EngineOptions options) : state_(std::make_unique<State>()) {
  assert(options.world_size > 0);
  state_->options = options;
  state_->bitset_words = (static_cast<size_t>(options.world_size) + 63) / 64;
  state_->joined.assign(options.world_size, 0);
  state_->departed.assign(options.world_size, 0);
  state_->last_submission.assign(options.world_size, TimePoint::min());
}

NegotiationEngine::~NegotiationEngine() = default;

size_t NegotiationEngine::in_flight_count() const { return state_->active.size(); }
size_t NegotiationEngine::cache_size() const { return state_->cache.size(); }

int NegotiationEngine::State::fusion_key_for(const TensorMeta& meta) {
  if (meta.op != v1::COLLECTIVE_OP_ALLREDUCE && meta.op != v1::COLLECTIVE_OP_ALLGATHER) return -1;
  if (meta.group_id != 0) return -1;  // groups run as their own response
  const engine::FusionKey key{meta.op, meta.dtype, meta.device, meta.reduce_op, meta.prescale,
                              meta.postscale};
  for (size_t i = 0; i < fusion_keys.size(); ++i) {
    if (fusion_keys[i] == key) return static_cast<int>(i);
  }
  fusion_keys.push_back(key);
  not_ready_by_key.push_back(0);
  return static_cast<int>(fusion_keys.size() - 1);
}

PendingTensor& NegotiationEngine::State::slot_for_name(const std::string& name) {
  if (auto it = cache_id_by_name.find(name); it != cache_id_by_name.end()) {
    return *cache[it->second - 1].slot;
  }
  auto& slot = uncached[name];
  if (!slot) {
    slot = std::make_unique<PendingTensor>();
    slot->name = name;
  }
  return *slot;
}

void NegotiationEngine::State::activate(PendingTensor& tensor, TimePoint now) {
  tensor.active = true;
  tensor.first_time = now;
  tensor.arrival = next_arrival++;
  tensor.submitted.assign(bitset_words, 0);
  tensor.count = 0;
  tensor.reference = nullptr;
  tensor.reference_from_cache = false;
  tensor.disagreements.clear();
  tensor.invalid.clear();
  tensor.ready = false;
  tensor.joined_at_ready.clear();
  tensor.first_dims.clear();
  tensor.splits.clear();
  tensor.fusion_key = -1;
  tensor.active_index = active.size();
  active.push_back(&tensor);
}

void NegotiationEngine::State::release(PendingTensor& tensor) {
  tensor.active = false;
  tensor.ready = false;
  PendingTensor* last = active.back();
  active[tensor.active_index] = last;
  last->active_index = tensor.active_index;
  active.pop_back();
  if (tensor.cache_id == 0) {
    // An uncached slot is not reused (the name may get a cache entry); drop it.
    const std::string name = tensor.name;
    uncached.erase(name);
  }
}

void NegotiationEngine::State::mark_ready(PendingTensor& tensor, TimePoint now) {
  tensor.ready = true;
  tensor.ready_time = now;
  if (tensor.fusion_key >= 0) --not_ready_by_key[tensor.fusion_key];
  if (joined_count > 0) {
    for (int r = 0; r < options.world_size; ++r) {
      if (joined[r] && !tensor.has_rank(r)) tensor.joined_at_ready.push_back(r);
    }
  }
  ready.push_back(&tensor);
}

void NegotiationEngine::State::check_ready(PendingTensor& tensor, TimePoint now) {
  if (tensor.ready) return;
  // A tensor some rank got wrong still waits for every rank, so that one error reaches all.
  const int world = options.world_size;
  if (joined_count == 0 && !any_departed) {
    if (tensor.count == world) mark_ready(tensor, now);
    return;
  }
  // Slow path (someone joined or left): look at each missing rank.
  bool complete = true;
  for (int r = 0; r < world; ++r) {
    if (departed[r]) {
      // Gone either way: it can no longer run this collective with the others (a request it
      // sent before its Goodbye was cancelled by its shutdown()).
      const std::string what =
          std::string(engine::op_name(tensor.reference->op)) + " '" + tensor.name + "'";
      std::vector<int> waiting;  // the ranks left waiting for it
      for (int other = 0; other < world; ++other)
        if (other != r && tensor.has_rank(other)) waiting.push_back(rank_name(other));
      const std::string waiters =
          waiting.empty() ? std::string()
                          : std::string(waiting.size() == 1 ? ", which rank " : ", which ranks ") +
                                engine::format_ranks(waiting) +
                                (waiting.size() == 1 ? " waits for" : " wait for");
      tensor.invalid =
          tensor.has_rank(r)
              ? "rank " + std::to_string(rank_name(r)) + " left the job (shut down) after submitting " + what +
                    " but before every rank did, so it cannot take part" + waiters +
                    "; every rank must wait for its collectives before shutdown()"
              : "rank " + std::to_string(rank_name(r)) + " left the job (shut down) without submitting " +
                    what + waiters + "; every rank must submit it, or call join() when it runs out of data";
      // The first few say who left; an owner that never takes them keeps no more.
      constexpr size_t kDepartureFailuresKept = 16;
      if (departure_failures.size() < kDepartureFailuresKept)
        departure_failures.push_back({rank_name(r), tensor.invalid});
      return mark_ready(tensor, now);
    }
    if (tensor.has_rank(r) || joined[r]) continue;
    complete = false;
  }
  if (complete) {
    const TensorMeta& meta = *tensor.reference;
    const bool root_known = meta.root_rank >= 0 && meta.root_rank < world;  // else invalid
    if (meta.op == v1::COLLECTIVE_OP_BROADCAST && root_known && joined[meta.root_rank] &&
        !tensor.has_rank(meta.root_rank) && tensor.invalid.empty()) {
      tensor.invalid = "broadcast '" + tensor.name + "' has root rank " +
                       std::to_string(rank_name(meta.root_rank)) +
                       ", which has joined and cannot provide the data";
    }
    mark_ready(tensor, now);
  }
}

// One rank's submission of one tensor; `meta` is what it sent (full) or its cache entry's.
static void record_submission(NegotiationEngine::State& s, PendingTensor& tensor, int rank,
                              const TensorMeta& meta, bool from_cache, int64_t first_dim,
                              const std::string& problem, TimePoint now) {
  const int world = s.options.world_size;
  if (!tensor.active) s.activate(tensor, now);
  if (tensor.has_rank(rank)) {
    s.immediate.push_back(rank_error(tensor.name, meta.op, rank, duplicate_message(s.rank_name(rank), tensor.name)));
    return;
  }
  if (tensor.ready) {
    s.immediate.push_back(rank_error(tensor.name, meta.op, rank, after_join_message(s.rank_name(rank), tensor.name)));
    return;
  }
  tensor.submitted[rank >> 6] |= uint64_t{1} << (rank & 63);
  ++tensor.count;
  if (tensor.reference == nullptr) {
    if (from_cache) {
      tensor.reference = &meta;
      tensor.reference_from_cache = true;
    } else {
      tensor.owned_reference = meta;
      tensor.reference = &tensor.owned_reference;
    }
    tensor.fusion_key = s.fusion_key_for(meta);
    if (tensor.fusion_key >= 0) ++s.not_ready_by_key[tensor.fusion_key];
    if (meta.op == v1::COLLECTIVE_OP_ALLGATHER || meta.op == v1::COLLECTIVE_OP_ALLTOALL) {
      tensor.first_dims.assign(world, 0);
    }
    if (meta.op == v1::COLLECTIVE_OP_ALLTOALL) tensor.splits.assign(world, {});
  } else if (!(from_cache && tensor.reference_from_cache) &&
             !engine::agree_across_ranks(*tensor.reference, meta)) {
    auto same = std::find_if(tensor.disagreements.begin(), tensor.disagreements.end(),
                             [&](const PendingTensor::Variant& v) { return v.meta == meta; });
    if (same == tensor.disagreements.end()) {
      tensor.disagreements.push_back({meta, {}});
      same = tensor.disagreements.end() - 1;
    }
    same->ranks.push_back(rank);
  }
  if (!tensor.first_dims.empty()) tensor.first_dims[rank] = first_dim;
  if (!tensor.splits.empty()) tensor.splits[rank] = meta.splits;
  if (!problem.empty() && tensor.invalid.empty()) tensor.invalid = problem;
  s.check_ready(tensor, now);
}

static void handle_join(NegotiationEngine::State& s, int rank, TimePoint now) {
  if (s.joined[rank]) {
    s.immediate.push_back(rank_error("join", v1::COLLECTIVE_OP_JOIN, rank,
                                     "rank " + std::to_string(rank) +
                                         " called join() again while its earlier join is still "
                                         "waiting for the other ranks"));
    return;
  }
  s.joined[rank] = 1;
  ++s.joined_count;
  // Tensors that waited only for this rank are ready now (scan a copy: check_ready appends).
  const std::vector<PendingTensor*> active = s.active;
  for (PendingTensor* tensor : active) s.check_ready(*tensor, now);
  if (s.joined_count < s.options.world_size) return;
  v1::Response done;
  done.set_op(v1::COLLECTIVE_OP_JOIN);
  done.add_tensors()->set_name("join");
  done.set_last_joined_rank(rank);
  done.set_contributing_ranks(0);
  for (int r = 0; r < s.options.world_size; ++r) done.add_joined_ranks(r);
  s.join_done = std::move(done);
  std::fill(s.joined.begin(), s.joined.end(), 0);
  s.joined_count = 0;
}

Status NegotiationEngine::submit(int rank, const v1::RequestBatch& batch, TimePoint now) {
  State& s = *state_;
  if (rank < 0 || rank >= s.options.world_size) {
    return invalid_argument("negotiation request from rank " + std::to_string(rank) +
                            ", but the job has ranks 0-" + std::to_string(s.options.world_size - 1));
  }
  const int world = s.options.world_size;
  s.last_submission[rank] = now;
  auto submit_cached = [&](uint32_t id) -> Status {
    if (id == 0 || id > s.cache_slots.size()) {
      return invalid_argument("rank " + std::to_string(rank) + " sent cache id " +
                              std::to_string(id) + ", which the coordinator never assigned (" +
                              std::to_string(s.cache_slots.size()) +
                              " ids so far); the worker's response cache is out of step");
    }
    PendingTensor& tensor = *s.cache_slots[id - 1];
    // The steady state's fast path: the tensor is already in flight by its cached metadata,
    // this rank is new to it, nothing per rank to record, nobody joined or left.
    if (s.joined_count == 0 && !s.any_departed && tensor.active && !tensor.ready &&
        tensor.reference_from_cache && tensor.first_dims.empty() && !tensor.has_rank(rank)) {
      tensor.submitted[rank >> 6] |= uint64_t{1} << (rank & 63);
      if (++tensor.count == world) s.mark_ready(tensor, now);
      return Status::ok();
    }
    engine::CacheEntry& entry = s.cache[id - 1];
    const int64_t first_dim = entry.first_dims.empty() ? 0 : entry.first_dims[rank];
    record_submission(s, tensor, rank, entry.meta, true, first_dim, kNoProblem, now);
    return Status::ok();
  };
  for (const v1::TensorRequest& request : batch.requests()) {
    if (request.cache_id() != 0) {
      HVRUN_RETURN_IF_ERROR(submit_cached(request.cache_id()));
      continue;
    }
    if (request.name().empty()) {
      return invalid_argument("rank " + std::to_string(rank) +
                              " sent a tensor request with neither a name nor a cache id");
    }
    if (request.op() == v1::COLLECTIVE_OP_UNSPECIFIED || !v1::CollectiveOp_IsValid(request.op())) {
      return invalid_argument("rank " + std::to_string(rank) + " sent tensor '" + request.name() +
                              "' without a valid op");
    }
    if (request.op() == v1::COLLECTIVE_OP_JOIN) {
      handle_join(s, rank, now);
      continue;
    }
    const TensorMeta meta = engine::meta_from_request(request);
    PendingTensor& tensor = s.slot_for_name(request.name());
    const std::string problem = check_alone(meta, request.name(), s.rank_name(rank), s.options.world_size);
    const int64_t first_dim = meta.shape.empty() ? 0 : meta.shape[0];
    record_submission(s, tensor, rank, meta, false, first_dim, problem, now);
  }
  for (uint32_t id : batch.cached_ids()) HVRUN_RETURN_IF_ERROR(submit_cached(id));
  return Status::ok();
}

void NegotiationEngine::rank_departed(int rank, TimePoint now) {
  State& s = *state_;
  if (rank < 0 || rank >= s.options.world_size || s.departed[rank]) return;
  s.departed[rank] = 1;
  s.any_departed = true;
  const std::vector<PendingTensor*> active = s.active;
  for (PendingTensor* tensor : active) s.check_ready(*tensor, now);
}

std::vector<DepartureFailure> NegotiationEngine::take_departure_failures() {
  return std::exchange(state_->departure_failures, {});
}

std::optional<v1::Plan> NegotiationEngine::take_plan(TimePoint now) {
  return state_->build_plan(now);
}

std::optional<TimePoint> NegotiationEngine::next_deadline() const {
  const State& s = *state_;
  if (!s.immediate.empty() || s.join_done) return TimePoint::min();
  std::optional<TimePoint> earliest;
  for (const PendingTensor* tensor : s.ready) {
    if (tensor->grouped()) continue;  // waits for its group, not the clock
    const TimePoint due = tensor->ready_time + s.options.cycle_time;
    if (!earliest || due < *earliest) earliest = due;
  }
  return earliest;
}

}  // namespace hvrun::coordinator

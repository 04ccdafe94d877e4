// How the data plane tells telemetry where a response's time went: the CPU executor
// calls the observer for each phase of each response it runs: pack (copy/scale into the fusion
// buffer), collective (inside the backend), unpack (copy/scale out). The observer adds the
// phase to cumulative per-(op, backend) counters and, only while the job's timeline records,
// to the timeline event buffer (worker_lib/telemetry/worker_telemetry.h).
//
// Cost contract: with no observer set, a phase costs one pointer test. With one, two
// steady_clock reads and a short, uncontended, allocation-free counter update.
//
// Where a backend packs/unpacks inside its collective (zero-copy path), report kCollective for
// the whole, and pack/unpack either as the backend measured them or not at all; counters treat
// a missing pack/unpack as zero. `bytes`: payload bytes of THIS rank's tensors in the response
// (the same number for each phase of one response).
//
// Threads: called under the runtime's executor lock, from the background thread (plans) or an
// API thread (the fast path's collectives).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "hvrun.pb.h"

namespace hvrun::detail::telemetry {

enum class Phase : int { kPack = 0, kCollective = 1, kUnpack = 2 };

inline const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kPack: return "pack";
    case Phase::kCollective: return "collective";
    case Phase::kUnpack: return "unpack";
  }
  return "?";
}

using PhaseClock = std::chrono::steady_clock;

// What an observer reads of a response: its op, its tensor count and its first tensor's name
// (the view lives as long as the call). A phase that ends after the response is gone (a CUDA
// response finishes on another thread) keeps these three, not the response.
struct ResponseGist {
  v1::CollectiveOp op = v1::COLLECTIVE_OP_ALLREDUCE;
  int tensors = 0;
  std::string_view first_name;

  static ResponseGist of(const v1::Response& r) {
    return {r.op(), r.tensors_size(), r.tensors_size() > 0 ? std::string_view(r.tensors(0).name())
                                                           : std::string_view()};
  }
};

class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  // One phase of `response` ran from `start` to `end`. `backend`: "shm", "gloo",
  // "hierarchical", "nccl", "local" (size 1, nothing crossed a wire). Count a response's tensors
  // and bytes once: kCollective does (call it exactly once per response that moved data, also
  // with zero length when the backend was not needed).
  virtual void on_phase(const ResponseGist& response, Phase phase, PhaseClock::time_point start,
                        PhaseClock::time_point end, uint64_t bytes, std::string_view backend) = 0;
  void on_phase(const v1::Response& response, Phase phase, PhaseClock::time_point start,
                PhaseClock::time_point end, uint64_t bytes, std::string_view backend) {
    on_phase(ResponseGist::of(response), phase, start, end, bytes, backend);
  }
  // One collective of one tensor that the ranks agreed to run without the coordinator (the fast
  // path), from `start` to `end`, on whichever thread ran it; `on_gpu`: of CUDA tensors (the
  // GPU executor's). Counted apart from the backend's planned collectives; an observer that
  // only follows plans ignores it.
  virtual void on_fast_collective(v1::CollectiveOp /*op*/, PhaseClock::time_point /*start*/,
                                  PhaseClock::time_point /*end*/, uint64_t /*bytes*/,
                                  bool /*on_gpu*/) {}
};

// Times one phase from construction to destruction (or to finish()); a null observer costs
// nothing but the test. Usage inside an executor:
//   { telemetry::ScopedPhase phase(observer_, r, telemetry::Phase::kPack, bytes, backend_name_);
//     ...pack... }
class ScopedPhase {
 public:
  ScopedPhase(PhaseObserver* observer, const v1::Response& response, Phase phase, uint64_t bytes,
              std::string_view backend)
      : observer_(observer), response_(response), phase_(phase), bytes_(bytes), backend_(backend) {
    if (observer_) start_ = PhaseClock::now();
  }
  ~ScopedPhase() { finish(); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

  // Ends the phase now (idempotent).
  void finish() {
    if (!observer_) return;
    observer_->on_phase(response_, phase_, start_, PhaseClock::now(), bytes_, backend_);
    observer_ = nullptr;
  }

 private:
  PhaseObserver* observer_;
  const v1::Response& response_;
  Phase phase_;
  uint64_t bytes_;
  std::string_view backend_;
  PhaseClock::time_point start_{};
};

}  // namespace hvrun::detail::telemetry

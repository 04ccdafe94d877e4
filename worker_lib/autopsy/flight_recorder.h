// The flight recorder: a bounded ring of this rank's latest collectives (name, op, dtype, bytes,
// process set, sequence, submit / start / end times, who ran it, state), kept on by default so
// that an autopsy (responder.h) can say what a stuck rank did last and what it waits in.
//
// Cost: a submission claims a sequence with one atomic add and writes its slot with relaxed
// stores (no lock, no allocation); start and end are two stores each. A slot is overwritten
// after `capacity` newer submissions; an update for a record already overwritten is dropped.
//
// Threads: submitted() from any thread (API threads, concurrently); started() / ended() from
// the thread executing the collective; snapshot() from any thread. Readers never block
// writers: a slot rewritten while it is read is skipped (its sequence changed).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hvrun.pb.h"
#include "hvrun/types.h"

namespace hvrun::detail {

class FlightRecorder {
 public:
  // Who ran a collective, as the ring reports it.
  enum class Runner : uint8_t { kNone, kCpuBackend, kGpu, kFastPath, kLocal };
  enum class State : uint8_t { kSubmitted, kRunning, kDone, kFailed };

  // `capacity` > 0 slots; `cpu_backend` names the CPU backend ("shm", "gloo", ...).
  FlightRecorder(size_t capacity, std::string cpu_backend);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // A collective entered this rank's queue; returns its sequence (> 0) for started / ended.
  uint64_t submitted(std::string_view name, v1::CollectiveOp op, DataType dtype, uint64_t bytes,
                     uint32_t process_set) {
    return record(name, op, dtype, bytes, process_set, Runner::kNone, false);
  }
  // A collective that starts as it is submitted (the fast path, once agreed): one clock read.
  uint64_t submitted_running(std::string_view name, v1::CollectiveOp op, DataType dtype,
                             uint64_t bytes, uint32_t process_set, Runner runner) {
    return record(name, op, dtype, bytes, process_set, runner, true);
  }
  void started(uint64_t sequence, Runner runner) { started(sequence, runner, now_us()); }
  void ended(uint64_t sequence, bool ok) { ended(sequence, ok, now_us()); }
  // The same at a time the caller read (now_us()): the collectives of one response start and
  // end together, and a fused step's 161 need one clock read, not 161.
  void started(uint64_t sequence, Runner runner, int64_t at_us);
  void ended(uint64_t sequence, bool ok, int64_t at_us);
  static int64_t now_us();  // the wall clock the records use, in microseconds
  // The end of a collective too short to time twice (the fast path's in-round allreduce, well
  // under a microsecond): its end time is its start time, and no clock is read.
  void ended_untimed(uint64_t sequence, bool ok);

  // Every record still in the ring, oldest first.
  std::vector<v1::FlightRecord> snapshot() const;
  size_t capacity() const { return capacity_; }
  uint64_t recorded() const { return next_.load(std::memory_order_relaxed) - 1; }

 private:
  static constexpr size_t kNameWords = 8;  // 64 bytes: 63 of the name and a NUL
  // One cache-line pair per record, so that concurrent submitters do not share lines.
  struct alignas(64) Slot {
    std::atomic<uint64_t> sequence{0};  // 0 = empty; written last by submitted()
    std::atomic<uint64_t> name[kNameWords] = {};
    std::atomic<uint32_t> meta{0};       // op | dtype << 8 | state << 16 | runner << 24
    std::atomic<uint32_t> process_set{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<int64_t> submit_us{0};
    std::atomic<int64_t> start_us{0};
    std::atomic<int64_t> end_us{0};
    std::atomic<int64_t> submitter_tid{0};
  };
  uint64_t record(std::string_view name, v1::CollectiveOp op, DataType dtype, uint64_t bytes,
                  uint32_t process_set, Runner runner, bool running);
  Slot* slot_of(uint64_t sequence) const { return &slots_[sequence % capacity_]; }
  void set_state(Slot& slot, State state, Runner runner, bool keep_runner);

  const size_t capacity_;
  const std::string cpu_backend_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_{1};
};

}  // namespace hvrun::detail

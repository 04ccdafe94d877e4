#include "worker_lib/autopsy/flight_recorder.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace hvrun::detail {
namespace {

// The kernel's id of the calling thread, asked once per thread.
int64_t this_thread_tid() {
  thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

const char* state_text(FlightRecorder::State state) {
  switch (state) {
    case FlightRecorder::State::kSubmitted: return "submitted";
    case FlightRecorder::State::kRunning: return "running";
    case FlightRecorder::State::kDone: return "done";
    case FlightRecorder::State::kFailed: return "failed";
  }
  return "unknown";
}

}  // namespace

int64_t FlightRecorder::now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

FlightRecorder::FlightRecorder(size_t capacity, std::string cpu_backend)
    : capacity_(capacity > 0 ? capacity : 1),
      cpu_backend_(std::move(cpu_backend)),
      slots_(new Slot[capacity_]) {}

uint64_t FlightRecorder::record(std::string_view name, v1::CollectiveOp op, DataType dtype,
                                uint64_t bytes, uint32_t process_set, Runner runner,
                                bool running) {
  const uint64_t sequence = next_.fetch_add(1, std::memory_order_relaxed);
  Slot& slot = *slot_of(sequence);
  // Readers compare the sequence before and after reading: mark the slot as being rewritten.
  slot.sequence.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t words[kNameWords] = {};
  if (!name.empty()) std::memcpy(words, name.data(), std::min(name.size(), sizeof words - 1));
  for (size_t i = 0; i < kNameWords; ++i) slot.name[i].store(words[i], std::memory_order_relaxed);
  const State state = running ? State::kRunning : State::kSubmitted;
  slot.meta.store(static_cast<uint32_t>(op) | (static_cast<uint32_t>(dtype) << 8) |
                      (static_cast<uint32_t>(state) << 16) | (static_cast<uint32_t>(runner) << 24),
                  std::memory_order_relaxed);
  slot.process_set.store(process_set, std::memory_order_relaxed);
  slot.bytes.store(bytes, std::memory_order_relaxed);
  const int64_t now = now_us();
  slot.submit_us.store(now, std::memory_order_relaxed);
  slot.start_us.store(running ? now : 0, std::memory_order_relaxed);
  slot.end_us.store(0, std::memory_order_relaxed);
  slot.submitter_tid.store(this_thread_tid(), std::memory_order_relaxed);
  slot.sequence.store(sequence, std::memory_order_release);
  return sequence;
}

void FlightRecorder::set_state(Slot& slot, State state, Runner runner, bool keep_runner) {
  uint32_t meta = slot.meta.load(std::memory_order_relaxed);
  meta = (meta & 0xffffu) | (static_cast<uint32_t>(state) << 16) |
         (keep_runner ? (meta & 0xff000000u) : (static_cast<uint32_t>(runner) << 24));
  slot.meta.store(meta, std::memory_order_relaxed);
}

void FlightRecorder::started(uint64_t sequence, Runner runner, int64_t at_us) {
  if (sequence == 0) return;
  Slot& slot = *slot_of(sequence);
  if (slot.sequence.load(std::memory_order_relaxed) != sequence) return;  // overwritten
  slot.start_us.store(at_us, std::memory_order_relaxed);
  set_state(slot, State::kRunning, runner, false);
}

void FlightRecorder::ended(uint64_t sequence, bool ok, int64_t at_us) {
  if (sequence == 0) return;
  Slot& slot = *slot_of(sequence);
  if (slot.sequence.load(std::memory_order_relaxed) != sequence) return;
  slot.end_us.store(at_us, std::memory_order_relaxed);
  set_state(slot, ok ? State::kDone : State::kFailed, Runner::kNone, true);
}

void FlightRecorder::ended_untimed(uint64_t sequence, bool ok) {
  if (sequence == 0) return;
  Slot& slot = *slot_of(sequence);
  if (slot.sequence.load(std::memory_order_relaxed) != sequence) return;
  slot.end_us.store(slot.start_us.load(std::memory_order_relaxed), std::memory_order_relaxed);
  set_state(slot, ok ? State::kDone : State::kFailed, Runner::kNone, true);
}

std::vector<v1::FlightRecord> FlightRecorder::snapshot() const {
  std::vector<v1::FlightRecord> records;
  const uint64_t next = next_.load(std::memory_order_acquire);
  const uint64_t first = next > capacity_ ? next - capacity_ : 1;
  records.reserve(static_cast<size_t>(next - first));
  for (uint64_t sequence = first; sequence < next; ++sequence) {
    const Slot& slot = *slot_of(sequence);
    if (slot.sequence.load(std::memory_order_acquire) != sequence) continue;
    uint64_t words[kNameWords];
    for (size_t i = 0; i < kNameWords; ++i) words[i] = slot.name[i].load(std::memory_order_relaxed);
    const uint32_t meta = slot.meta.load(std::memory_order_relaxed);
    v1::FlightRecord record;
    record.set_sequence(sequence);
    record.set_op(static_cast<v1::CollectiveOp>(meta & 0xffu));
    record.set_process_set_id(slot.process_set.load(std::memory_order_relaxed));
    record.set_bytes(slot.bytes.load(std::memory_order_relaxed));
    record.set_submit_unix_us(slot.submit_us.load(std::memory_order_relaxed));
    record.set_start_unix_us(slot.start_us.load(std::memory_order_relaxed));
    record.set_end_unix_us(slot.end_us.load(std::memory_order_relaxed));
    record.set_submitter_tid(slot.submitter_tid.load(std::memory_order_relaxed));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) != sequence) continue;  // rewritten meanwhile
    const char* text = reinterpret_cast<const char*>(words);
    record.set_name(std::string(text, ::strnlen(text, sizeof words - 1)));
    record.set_dtype(static_cast<v1::DataType>((meta >> 8) & 0xffu));  // the same numbers
    record.set_state(state_text(static_cast<State>((meta >> 16) & 0xffu)));
    switch (static_cast<Runner>(meta >> 24)) {
      case Runner::kNone: break;
      case Runner::kCpuBackend: record.set_backend(cpu_backend_); break;
      case Runner::kGpu: record.set_backend("nccl"); break;
      case Runner::kFastPath: record.set_backend(cpu_backend_ + "-fast"); break;
      case Runner::kLocal: record.set_backend("local"); break;
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace hvrun::detail

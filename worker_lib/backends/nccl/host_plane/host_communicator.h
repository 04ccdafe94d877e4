// What an NCCL communicator is to the host plane: the ranks of one communicator exchanging
// messages through a POSIX shared-memory segment, in lock step.
//
// Every collective is one exchange(): each rank offers a message (its bytes, any length) and
// sees, round after round, the same window of every rank's message; the collective's consumer
// turns the windows into its result (a reduction in rank order, copies). A round's window is at
// most slot_bytes per rank, so a message of any size moves through a fixed segment. Because every
// rank runs the same exchanges in the same order (the executor's contract), the rounds line up.
//
// Life cycle: rank 0 creates the segment under the communicator's id, every rank maps it and
// counts itself in, and rank 0 unlinks the name once all did (a crash after that leaves nothing in
// /dev/shm). poison() is ncclCommAbort as the peers see it: their exchanges fail at once with a
// remote error naming this rank and why; a peer process that died is found the same way.
//
// Threads: exchange() runs on the owning plane's stream thread; poison() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"

namespace hvrun::detail::cuda {

// A round of an exchange: offset into every rank's message, and rank k's window
// (windows[k], lengths[k] bytes; 0 when rank k's message is shorter).
using ExchangeConsumer = std::function<void(size_t offset, std::span<const std::byte* const> windows,
                                            std::span<const size_t> lengths)>;

struct HostCommunicatorOptions {
  std::string id;  // the "unique id" rank 0 made (new_id())
  int rank = 0;
  int size = 1;
  size_t slot_bytes = size_t{256} << 10;
};

class HostCommunicator {
 public:
  // A fresh id: the segment's name, unique on this machine.
  static std::string new_id();
  // The id of the communicator that the survivors of `id` make when the old ranks `excluded`
  // (ascending) left: the same on every survivor without a word exchanged, as ncclCommShrink
  // derives the child from its parent, and unique as long as `id` was.
  static std::string shrunk_id(const std::string& id, std::span<const int> excluded);

  // Creates (rank 0) or opens the segment and waits until every rank mapped it. Polls `stop`
  // (the plane's abort) and the deadline, as a non-blocking NCCL init does.
  static Result<std::unique_ptr<HostCommunicator>> attach(
      const HostCommunicatorOptions& options, const std::atomic<bool>& stop,
      std::chrono::steady_clock::time_point deadline);
  ~HostCommunicator();
  HostCommunicator(const HostCommunicator&) = delete;
  HostCommunicator& operator=(const HostCommunicator&) = delete;

  // Offers `bytes` bytes at `message` and calls `consume` for every round. Fails (kAborted)
  // when `stop` is set, or with the peer's reason when a peer poisoned the communicator or died.
  Status exchange(const void* message, size_t bytes, const ExchangeConsumer& consume,
                  const std::atomic<bool>& stop);

  // Tells the peers this rank aborted the communicator (first reason wins).
  void poison(const std::string& reason);

  const std::string& id() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Layout;
  HostCommunicator(void* base, size_t bytes, int rank, int size, size_t slot_bytes, std::string name);
  // Waits until `ready(k)` holds for every rank k; the futex word to sleep on is `word(k)`.
  Status wait_all(const std::function<bool(int)>& ready,
                  const std::function<std::atomic<uint32_t>*(int)>& word,
                  const std::atomic<bool>& stop, const char* waiting_for);
  Status peer_failure() const;  // a poisoned segment or a dead peer, else ok

  void* base_;
  size_t bytes_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  std::string name_;
  bool unlinked_ = false;
  uint32_t round_ = 0;  // exchange rounds run so far (the same on every rank)
};

}  // namespace hvrun::detail::cuda

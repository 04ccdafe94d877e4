#include "worker_lib/agreement/host_rounds/host_rounds.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"

namespace hvrun::detail::agreement {

HostRounds::HostRounds(shm::RoundBoard* board, std::unique_ptr<RoundLink> link, int host,
                       std::chrono::milliseconds op_timeout)
    : board_(board),
      link_(std::move(link)),
      host_(host),
      op_timeout_(op_timeout),
      wake_fd_(::eventfd(0, EFD_CLOEXEC)) {}

HostRounds::~HostRounds() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::byte* HostRounds::open(uint32_t gen, size_t payload_bytes,
                            std::chrono::steady_clock::time_point deadline) {
  held_bytes_ = payload_bytes;
  std::byte* mine = nullptr;
  if (!aborted_.load() && payload_bytes <= kCapacity)
    mine = board_ != nullptr ? board_->open(gen, payload_bytes, deadline) : solo_;
  if (mine == nullptr && speaker()) report_failed(gen);
  return mine;
}

RoundOutcome HostRounds::join(uint32_t gen, const RoundKey& key,
                              std::chrono::steady_clock::time_point deadline) {
  RoundOutcome local = RoundOutcome::kAgreed;
  if (board_ != nullptr)
    local = board_->join(gen, key, deadline);
  else if (aborted_.load())
    local = RoundOutcome::kAborted;
  if (local != RoundOutcome::kAgreed) {
    if (speaker()) report_failed(gen);
    return local;
  }
  if (speaker()) {
    const RoundOutcome verdict = ask_arbiter(gen, key);
    if (board_ != nullptr) board_->publish_verdict(gen, verdict, result_, held_bytes_);
    return verdict;
  }
  const RoundOutcome verdict =
      board_->await_verdict(gen, std::chrono::steady_clock::now() + op_timeout_);
  if (verdict == RoundOutcome::kAgreed)
    std::memcpy(result_, board_->verdict_data(), held_bytes_);
  else if (verdict == RoundOutcome::kAborted && !board_->aborted())
    spdlog::error("cross-host round {}: no verdict from local rank 0 of host {} within the op "
                  "timeout ({} ms)",
                  gen, host_, op_timeout_.count());
  return verdict;
}

RoundOutcome HostRounds::ask_arbiter(uint32_t gen, const RoundKey& key) {
  // The host's AND goes to the arbiter, which ANDs the hosts'.
  if (board_ != nullptr)
    board_->and_payloads(reinterpret_cast<uint64_t*>(result_), held_bytes_ / sizeof(uint64_t));
  else
    std::memcpy(result_, solo_, held_bytes_);
  RoundMessage report;
  report.kind = RoundMessageKind::kAgreed;
  report.gen = gen;
  report.key = key;
  report.bytes = static_cast<uint32_t>(held_bytes_);
  if (Status sent = link_->send(report, result_); !sent.is_ok()) {
    // The arbiter never heard this host agree, so it cannot decide the round agreed.
    SPDLOG_DEBUG("cross-host round {}: {}", gen, sent.message());
    return RoundOutcome::kFailed;
  }
  const auto deadline = std::chrono::steady_clock::now() + op_timeout_;
  pollfd fds[2] = {{link_->fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!aborted_.load()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      spdlog::error("cross-host round {}: no verdict from the round arbiter (rank 0's process) "
                    "within the op timeout ({} ms); is rank 0 stopped?",
                    gen, op_timeout_.count());
      return RoundOutcome::kAborted;
    }
    if (!link_->buffered()) {
      const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
      if (ready <= 0 || fds[1].revents != 0) continue;
    }
    RoundMessage verdict;
    std::byte data[kMaxRoundData];
    if (Status read = link_->receive(verdict, data); !read.is_ok()) {
      // Rank 0's process ended or closed the link: the job is ending.
      spdlog::error("cross-host round {}: the link to the round arbiter on rank 0 ended ({})",
                    gen, read.message());
      return RoundOutcome::kAborted;
    }
    if (verdict.kind != RoundMessageKind::kVerdict || verdict.gen != gen) continue;
    const auto outcome = static_cast<RoundOutcome>(verdict.value);
    if (outcome == RoundOutcome::kAgreed)
      std::memcpy(result_, data, std::min<size_t>(verdict.bytes, held_bytes_));
    return outcome;
  }
  return RoundOutcome::kAborted;
}

void HostRounds::and_payloads(uint64_t* out, size_t words) const {
  std::memcpy(out, result_, std::min(words * sizeof(uint64_t), kCapacity));
}

void HostRounds::release() {
  if (board_ != nullptr) board_->release();
}

void HostRounds::report_failed(uint32_t gen) {
  // Told once per round: a rank refuses the same round from several places.
  if (last_failed_report_.exchange(gen) == gen) return;
  RoundMessage failed;
  failed.kind = RoundMessageKind::kFailed;
  failed.gen = gen;
  if (Status sent = link_->send(failed, nullptr); !sent.is_ok())
    SPDLOG_DEBUG("cross-host round {}: refusal not sent: {}", gen, sent.message());
}

void HostRounds::refuse(uint32_t gen) {
  if (board_ != nullptr) board_->refuse(gen);
  if (speaker()) report_failed(gen);
}

void HostRounds::leave() {
  if (board_ != nullptr) board_->leave();
  // The arbiter fails every round from now on: the other hosts stop waiting for this one.
  if (speaker()) link_->close();
}

void HostRounds::abort() {
  aborted_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace hvrun::detail::agreement

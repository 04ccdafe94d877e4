// The messages of cross-host rounds (host_rounds.h) and the TCP link that carries them between a
// host's speaking rank and the round arbiter (round_arbiter.h). A message is a fixed header and
// at most kMaxRoundData bytes after it, written with one send(); hosts of a job share one
// architecture, so the header goes as it lies in memory.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/status.h"
#include "worker_lib/round_agreement.h"

namespace hvrun::detail::agreement {

constexpr uint32_t kRoundMagic = 0x68726e64;  // "hrnd"
constexpr size_t kMaxRoundData = 512;

enum class RoundMessageKind : uint32_t {
  kHello = 1,    // a host's speaker introduces itself: value = host index
  kAgreed = 2,   // a host agreed on round `gen` with `key`; data = the AND of its ranks' bits
  kFailed = 3,   // a host will not agree on round `gen` (its own round failed, or it refused)
  kVerdict = 4,  // the arbiter's decision on `gen`: value = RoundOutcome; data = the job's AND
};

struct RoundMessage {
  uint32_t magic = kRoundMagic;
  RoundMessageKind kind = RoundMessageKind::kHello;
  uint32_t gen = 0;
  uint32_t value = 0;
  RoundKey key;
  uint32_t bytes = 0;  // data after the header
  uint32_t reserved = 0;
};
static_assert(sizeof(RoundMessage) == 64);

// One end of a connected TCP socket. send() from any thread (serialised); receive() from one
// thread at a time.
class RoundLink {
 public:
  explicit RoundLink(int fd);
  ~RoundLink();
  RoundLink(const RoundLink&) = delete;
  RoundLink& operator=(const RoundLink&) = delete;

  // Connects to "address:port", retrying until `timeout` (the peer may not listen yet).
  static Result<std::unique_ptr<RoundLink>> connect(const std::string& address_port,
                                                    std::chrono::milliseconds timeout);

  Status send(const RoundMessage& header, const void* data);
  // Reads one whole message (data into `data`, kMaxRoundData bytes). Blocks; the rest of a
  // message whose first byte arrived comes within a second or the link is broken. Reads what
  // the socket holds at once (one system call for many messages), so a caller that waits for
  // the socket to be readable asks buffered() first.
  Status receive(RoundMessage& header, std::byte* data);
  // Whether a whole message is buffered already (receive() returns it without reading).
  bool buffered() const;
  // Ends both directions: the peer reads end-of-stream, a receive() here returns.
  void close();
  int fd() const { return fd_; }

 private:
  int fd_;
  std::mutex send_mutex_;
  // What was read but not returned yet: bytes [in_begin_, in_end_).
  std::array<std::byte, 8192> in_{};
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
};

// Sets TCP_NODELAY and a receive timeout on a connected socket.
void tune_round_socket(int fd);

}  // namespace hvrun::detail::agreement

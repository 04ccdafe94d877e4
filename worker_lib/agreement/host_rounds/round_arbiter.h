// The round arbiter of a multi-host job: decides every cross-host round (host_rounds.h) from the
// reports of the hosts' speakers, so that every rank of every host decides alike. It runs on a
// thread of its own in the process of the first host's speaker (rank 0), always responsive
// whatever that rank is doing, and listens on the data address.
//
// Per round `gen`, from one report per host (RoundMessageKind::kAgreed with the host's key and
// the AND of its ranks' bits, or kFailed):
//   - every host agreed with equal keys  -> kAgreed, the data the AND of the hosts' data;
//   - every host agreed, keys differ     -> kDisagreed;
//   - a host failed                      -> kFailed at once;
//   - a host silent `wait` after the round's first report -> kFailed;
//   - once a host's link closed (it left, or died), every round -> kFailed at once.
// The verdict goes to every host that reported kAgreed; a report for a decided round is
// answered with the recorded verdict (a host late past the wait learns the round failed). The
// last kRemembered verdicts are kept: a round's ranks are never that many rounds apart, since
// every round either agrees on every rank or is followed by a plan every rank executes. Work per
// round: one report and one verdict per host, read through epoll (nothing per round scans every
// host's link).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker_lib/agreement/host_rounds/round_link.h"

namespace hvrun::detail::agreement {

class RoundArbiter {
 public:
  static constexpr size_t kRemembered = 1024;

  // Listens on `address` (port chosen by the kernel) for `hosts` speakers.
  static Result<std::unique_ptr<RoundArbiter>> start(const std::string& address, int hosts,
                                                     std::chrono::nanoseconds wait);
  ~RoundArbiter();  // stops the thread, closes every link
  RoundArbiter(const RoundArbiter&) = delete;
  RoundArbiter& operator=(const RoundArbiter&) = delete;

  // "ADDRESS PORT", what RoundLink::connect takes.
  const std::string& address() const { return address_; }

 private:
  static constexpr uint8_t kNotReported = 0;
  static constexpr uint8_t kReportedAgreed = 1;
  static constexpr uint8_t kReportedFailed = 2;
  struct Pending {
    std::chrono::steady_clock::time_point first;
    std::vector<uint8_t> reported;  // by host index
    int reports = 0;
    RoundKey key;       // the first agreed report's
    bool same = true;   // every agreed report's key (and length) equals it
    size_t words = 0;   // of the bit vectors
    std::array<uint64_t, kMaxRoundData / sizeof(uint64_t)> bits{};  // their AND so far
  };
  struct Decided {
    RoundOutcome outcome = RoundOutcome::kFailed;
    std::vector<std::byte> data;
  };
  struct Peer {
    std::unique_ptr<RoundLink> link;
    int host = -1;  // known after its hello
    bool ended = false;
  };

  RoundArbiter(int listen_fd, int wake_fd, int epoll_fd, std::string address, int hosts,
               std::chrono::nanoseconds wait);
  void run();
  void accept_peer();
  // Reads the messages `peer` sent; marks it ended when its link did.
  void read_peer(Peer& peer);
  void read_one(Peer& peer);
  void on_report(int host, const RoundMessage& header, const std::byte* data);
  void decide(uint32_t gen, Pending& pending, RoundOutcome outcome);
  // A Pending for a new round, reused from a decided one (no allocation per round).
  std::unique_ptr<Pending> take_spare();
  void send_verdict(int host, uint32_t gen, const Decided& decided);
  void host_gone(int host);
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;
  void expire(std::chrono::steady_clock::time_point now);

  int listen_fd_;
  int wake_fd_;  // eventfd: the destructor's stop
  int epoll_fd_;
  std::string address_;
  int hosts_;
  std::chrono::nanoseconds wait_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> by_host_;  // the peer speaking for each host, or null
  bool host_gone_ = false;      // a host's link ended: every later round fails
  std::map<uint32_t, std::unique_ptr<Pending>> pending_;
  std::vector<std::unique_ptr<Pending>> spare_;
  std::map<uint32_t, Decided> decided_;
  std::deque<uint32_t> decided_order_;
  std::thread thread_;
};

}  // namespace hvrun::detail::agreement

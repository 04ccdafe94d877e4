#include "worker_lib/backends/shm/round_arbiter.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

namespace hvrun::detail::shm {
namespace {

std::string errno_text() { return std::strerror(errno); }

// The address and port a bound socket listens on, as RoundLink::connect reads them.
Result<std::string> listening_address(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0)
    return internal_error("getsockname of the round arbiter: " + errno_text());
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (int rc = ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), length, host, sizeof host, port,
                             sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
      rc != 0)
    return internal_error(std::string("getnameinfo of the round arbiter: ") + ::gai_strerror(rc));
  return std::string(host) + " " + port;
}

}  // namespace

Result<std::unique_ptr<RoundArbiter>> RoundArbiter::start(const std::string& address, int hosts,
                                                          std::chrono::nanoseconds wait) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(address.c_str(), "0", &hints, &found); rc != 0)
    return invalid_argument("round arbiter: data address '" + address +
                            "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("round arbiter socket: " + errno_text());
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, hosts + 8) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return unavailable("round arbiter: cannot listen on " + address + ": " + why);
  }
  auto bound = listening_address(fd);
  const int wake = bound.is_ok() ? ::eventfd(0, EFD_CLOEXEC) : -1;
  if (!bound.is_ok() || wake < 0) {
    ::close(fd);
    if (!bound.is_ok()) return bound.status();
    return unavailable("round arbiter eventfd: " + errno_text());
  }
  return std::unique_ptr<RoundArbiter>(
      new RoundArbiter(fd, wake, std::move(bound).value(), hosts, wait));
}

RoundArbiter::RoundArbiter(int listen_fd, int wake_fd, std::string address, int hosts,
                           std::chrono::nanoseconds wait)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      address_(std::move(address)),
      hosts_(hosts),
      wait_(wait),
      by_host_(static_cast<size_t>(hosts), nullptr) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-arbiter");
    run();
  });
}

RoundArbiter::~RoundArbiter() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void RoundArbiter::run() {
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& p : peers_) fds.push_back({p->link->fd(), POLLIN, 0});
    int timeout_ms = -1;
    if (auto next = next_deadline()) {
      const auto left = *next - std::chrono::steady_clock::now();
      // Rounded up: waking before the deadline would only poll again.
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("round arbiter: poll failed ({}); cross-host rounds stop agreeing",
                    errno_text());
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) accept_peer();
    // fds[2..] are the peers as they were before accept_peer() added one at the end.
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents != 0) read_peer(*peers_[i - 2]);
    std::erase_if(peers_, [](const std::unique_ptr<Peer>& p) { return p->ended; });
    expire(std::chrono::steady_clock::now());
  }
}

void RoundArbiter::accept_peer() {
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  tune_round_socket(fd);
  peers_.push_back(std::make_unique<Peer>(Peer{std::make_unique<RoundLink>(fd), -1, false}));
}

void RoundArbiter::read_peer(Peer& peer) {
  RoundMessage header;
  std::byte data[kMaxRoundData];
  Status read = peer.link->receive(header, data);
  if (!read.is_ok()) {
    peer.ended = true;
    if (peer.host >= 0) {
      SPDLOG_DEBUG("round arbiter: host {}'s link ended ({}); its rounds fail", peer.host,
                   read.message());
      host_gone(peer.host);
    }
    return;
  }
  if (header.kind == RoundMessageKind::kHello) {
    if (header.value >= static_cast<uint32_t>(hosts_)) {
      spdlog::error("round arbiter: a speaker claims host {} of {}; link dropped", header.value,
                    hosts_);
      peer.ended = true;
      return;
    }
    peer.host = static_cast<int>(header.value);
    by_host_[header.value] = &peer;
    return;
  }
  if (peer.host < 0) {  // reports before a hello: not one of ours
    peer.ended = true;
    return;
  }
  on_report(peer.host, header, data);
}

void RoundArbiter::on_report(int host, const RoundMessage& header, const std::byte* data) {
  const uint32_t gen = header.gen;
  const bool agreed = header.kind == RoundMessageKind::kAgreed;
  if (auto done = decided_.find(gen); done != decided_.end()) {
    // Late: a host that reported agreed waits for the verdict; a refusal needs no answer.
    if (agreed) send_verdict(host, gen, done->second);
    return;
  }
  auto [it, inserted] = pending_.try_emplace(gen);
  Pending& pending = it->second;
  if (inserted) pending.first = std::chrono::steady_clock::now();
  // A refusal after the host's agreement changes nothing: its speaker already arrived.
  if (!agreed && pending.reports.count(host) != 0) return;
  Report& report = pending.reports[host];
  report.agreed = agreed;
  report.key = header.key;
  report.data.assign(data, data + header.bytes);
  if (!agreed || host_gone_) {
    decide(gen, pending, RoundOutcome::kFailed);
    return;
  }
  if (pending.reports.size() < static_cast<size_t>(hosts_)) return;
  bool same = true;
  for (const auto& [h, r] : pending.reports) same = same && r.key == report.key;
  decide(gen, pending, same ? RoundOutcome::kAgreed : RoundOutcome::kDisagreed);
}

void RoundArbiter::decide(uint32_t gen, Pending& pending, RoundOutcome outcome) {
  Decided decided{.outcome = outcome, .data = {}};
  if (outcome == RoundOutcome::kAgreed) {
    // Every host's bit vector, ANDed (they are equally long: the keys say so).
    for (const auto& [h, r] : pending.reports) {
      if (decided.data.empty()) {
        decided.data = r.data;
        continue;
      }
      const size_t n = std::min(decided.data.size(), r.data.size());
      decided.data.resize(n);
      for (size_t b = 0; b < n; ++b) decided.data[b] &= r.data[b];
    }
  }
  for (const auto& [h, r] : pending.reports)
    if (r.agreed) send_verdict(h, gen, decided);
  pending_.erase(gen);
  decided_[gen] = std::move(decided);
  decided_order_.push_back(gen);
  if (decided_order_.size() > kRemembered) {
    decided_.erase(decided_order_.front());
    decided_order_.pop_front();
  }
}

void RoundArbiter::send_verdict(int host, uint32_t gen, const Decided& decided) {
  Peer* peer = by_host_[static_cast<size_t>(host)];
  if (peer == nullptr) return;  // gone: nobody there waits
  RoundMessage verdict;
  verdict.kind = RoundMessageKind::kVerdict;
  verdict.gen = gen;
  verdict.value = static_cast<uint32_t>(decided.outcome);
  verdict.bytes = static_cast<uint32_t>(decided.data.size());
  // A failed write means the link is ending: its read side tells the loop soon.
  Status sent = peer->link->send(verdict, decided.data.data());
  if (!sent.is_ok()) SPDLOG_DEBUG("round arbiter: verdict to host {}: {}", host, sent.message());
}

void RoundArbiter::host_gone(int host) {
  host_gone_ = true;
  by_host_[static_cast<size_t>(host)] = nullptr;
  std::vector<uint32_t> gens;
  for (const auto& [gen, p] : pending_) gens.push_back(gen);
  for (uint32_t gen : gens) decide(gen, pending_.at(gen), RoundOutcome::kFailed);
}

std::optional<std::chrono::steady_clock::time_point> RoundArbiter::next_deadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [gen, p] : pending_) {
    const auto at = p.first + wait_;
    if (!next || at < *next) next = at;
  }
  return next;
}

void RoundArbiter::expire(std::chrono::steady_clock::time_point now) {
  std::vector<uint32_t> late;
  for (const auto& [gen, p] : pending_)
    if (p.first + wait_ <= now) late.push_back(gen);
  for (uint32_t gen : late) {
    SPDLOG_DEBUG("round arbiter: round {} failed, {} of {} hosts reported within the wait", gen,
                 pending_.at(gen).reports.size(), hosts_);
    decide(gen, pending_.at(gen), RoundOutcome::kFailed);
  }
}

}  // namespace hvrun::detail::shm

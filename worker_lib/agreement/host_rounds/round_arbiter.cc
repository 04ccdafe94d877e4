#include "worker_lib/agreement/host_rounds/round_arbiter.h"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

namespace hvrun::detail::agreement {
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
  if (!bound.is_ok()) {
    ::close(fd);
    return bound.status();
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event on_wake{.events = EPOLLIN, .data = {}};
  epoll_event on_listen{.events = EPOLLIN, .data = {}};
  auto arbiter = std::unique_ptr<RoundArbiter>(
      new RoundArbiter(fd, wake, epoll, std::move(bound).value(), hosts, wait));
  on_wake.data.ptr = &arbiter->wake_fd_;
  on_listen.data.ptr = &arbiter->listen_fd_;
  if (wake < 0 || epoll < 0 || ::epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &on_wake) != 0 ||
      ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &on_listen) != 0)
    return unavailable("round arbiter: eventfd/epoll: " + errno_text());  // closes what opened
  arbiter->thread_ = std::thread([a = arbiter.get()] {
    pthread_setname_np(pthread_self(), "hvrun-arbiter");
    a->run();
  });
  return arbiter;
}

RoundArbiter::RoundArbiter(int listen_fd, int wake_fd, int epoll_fd, std::string address,
                           int hosts, std::chrono::nanoseconds wait)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      epoll_fd_(epoll_fd),
      address_(std::move(address)),
      hosts_(hosts),
      wait_(wait),
      by_host_(static_cast<size_t>(hosts), nullptr) {}

RoundArbiter::~RoundArbiter() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  peers_.clear();
  for (int fd : {listen_fd_, wake_fd_, epoll_fd_})
    if (fd >= 0) ::close(fd);
}

void RoundArbiter::run() {
  // epoll: a wake-up costs what is ready, not every host's link (a round wakes the loop up to
  // once per host).
  constexpr int kBatch = 64;
  epoll_event ready[kBatch];
  while (true) {
    int timeout_ms = -1;
    if (auto next = next_deadline()) {
      const auto left = *next - std::chrono::steady_clock::now();
      // Rounded up: waking before the deadline would only wait again.
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
    const int n = ::epoll_wait(epoll_fd_, ready, kBatch, timeout_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("round arbiter: epoll_wait failed ({}); cross-host rounds stop agreeing",
                    errno_text());
      return;
    }
    bool ended = false;
    for (int i = 0; i < n; ++i) {
      void* what = ready[i].data.ptr;
      if (what == &wake_fd_) return;
      if (what == &listen_fd_) {
        accept_peer();
        continue;
      }
      auto* peer = static_cast<Peer*>(what);
      if (!peer->ended) read_peer(*peer);
      ended = ended || peer->ended;
    }
    // Erased only after the batch, which may still name them.
    if (ended) std::erase_if(peers_, [](const std::unique_ptr<Peer>& p) { return p->ended; });
    expire(std::chrono::steady_clock::now());
  }
}

void RoundArbiter::accept_peer() {
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  tune_round_socket(fd);
  auto peer = std::make_unique<Peer>(Peer{std::make_unique<RoundLink>(fd), -1, false});
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = peer.get();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return;  // dropped: it closes
  peers_.push_back(std::move(peer));
}

void RoundArbiter::read_peer(Peer& peer) {
  // Every whole message the read brought: epoll says nothing more about bytes already read.
  do {
    read_one(peer);
  } while (!peer.ended && peer.link->buffered());
}

void RoundArbiter::read_one(Peer& peer) {
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
  if (inserted) {
    it->second = take_spare();
    it->second->first = std::chrono::steady_clock::now();
  }
  Pending& pending = *it->second;
  uint8_t& mark = pending.reported[static_cast<size_t>(host)];
  // A refusal after the host's agreement changes nothing: its speaker already arrived.
  if (mark != kNotReported && !agreed) return;
  if (mark == kNotReported) ++pending.reports;
  mark = agreed ? kReportedAgreed : kReportedFailed;  // agreed ones wait for the verdict
  if (!agreed || host_gone_) {
    decide(gen, pending, RoundOutcome::kFailed);
    return;
  }
  // The AND as reports come (bit vectors are equally long where keys are equal).
  const size_t words = std::min<size_t>(header.bytes, kMaxRoundData) / sizeof(uint64_t);
  if (pending.reports == 1) {
    pending.key = header.key;
    pending.words = words;
    std::memcpy(pending.bits.data(), data, words * sizeof(uint64_t));
  } else {
    pending.same = pending.same && header.key == pending.key && words == pending.words;
    for (size_t w = 0; w < std::min(words, pending.words); ++w) {
      uint64_t v;
      std::memcpy(&v, data + w * sizeof v, sizeof v);
      pending.bits[w] &= v;
    }
  }
  if (pending.reports < hosts_) return;
  decide(gen, pending, pending.same ? RoundOutcome::kAgreed : RoundOutcome::kDisagreed);
}

std::unique_ptr<RoundArbiter::Pending> RoundArbiter::take_spare() {
  std::unique_ptr<Pending> p;
  if (!spare_.empty()) {
    p = std::move(spare_.back());
    spare_.pop_back();
  } else {
    p = std::make_unique<Pending>();
  }
  p->reported.assign(static_cast<size_t>(hosts_), kNotReported);
  p->reports = 0;
  p->same = true;
  p->words = 0;
  return p;
}

void RoundArbiter::decide(uint32_t gen, Pending& pending, RoundOutcome outcome) {
  Decided decided{.outcome = outcome, .data = {}};
  if (outcome == RoundOutcome::kAgreed) {
    const auto* bytes = reinterpret_cast<const std::byte*>(pending.bits.data());
    decided.data.assign(bytes, bytes + pending.words * sizeof(uint64_t));
  }
  for (size_t h = 0; h < pending.reported.size(); ++h)
    if (pending.reported[h] == kReportedAgreed) send_verdict(static_cast<int>(h), gen, decided);
  auto node = pending_.extract(gen);
  if (node) spare_.push_back(std::move(node.mapped()));
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
  for (uint32_t gen : gens) decide(gen, *pending_.at(gen), RoundOutcome::kFailed);
}

std::optional<std::chrono::steady_clock::time_point> RoundArbiter::next_deadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [gen, p] : pending_) {
    const auto at = p->first + wait_;
    if (!next || at < *next) next = at;
  }
  return next;
}

void RoundArbiter::expire(std::chrono::steady_clock::time_point now) {
  std::vector<uint32_t> late;
  for (const auto& [gen, p] : pending_)
    if (p->first + wait_ <= now) late.push_back(gen);
  for (uint32_t gen : late) {
    SPDLOG_DEBUG("round arbiter: round {} failed, {} of {} hosts reported within the wait", gen,
                 pending_.at(gen)->reports, hosts_);
    decide(gen, *pending_.at(gen), RoundOutcome::kFailed);
  }
}

}  // namespace hvrun::detail::agreement

#include "worker_lib/agreement/host_rounds/round_link.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

namespace hvrun::detail::agreement {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void tune_round_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A message's header and data go in one send(): once its first byte is here, the rest is
  // late only if the peer's host is in trouble.
  timeval stall{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof stall);
}

RoundLink::RoundLink(int fd) : fd_(fd) {}

RoundLink::~RoundLink() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<RoundLink>> RoundLink::connect(const std::string& address_port,
                                                      std::chrono::milliseconds timeout) {
  const auto space = address_port.rfind(' ');
  if (space == std::string::npos)
    return internal_error("round arbiter address '" + address_port + "' is not 'ADDRESS PORT'");
  const std::string address = address_port.substr(0, space);
  const std::string port = address_port.substr(space + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(address.c_str(), port.c_str(), &hints, &found); rc != 0)
    return invalid_argument("round arbiter address '" + address_port +
                            "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no attempt";
  while (true) {
    const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return unavailable("socket for the round link: " + errno_text());
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      tune_round_socket(fd);
      return std::make_unique<RoundLink>(fd);
    }
    last = errno_text();
    ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return unavailable("could not connect to the round arbiter at " + address + " port " + port +
                     " within " + std::to_string(timeout.count()) + " ms (" + last +
                     "); check that the hosts reach each other on the data address "
                     "(--data-address)");
}

Status RoundLink::send(const RoundMessage& header, const void* data) {
  std::byte buffer[sizeof(RoundMessage) + kMaxRoundData];
  const size_t bytes = std::min<size_t>(header.bytes, kMaxRoundData);
  std::memcpy(buffer, &header, sizeof header);
  reinterpret_cast<RoundMessage*>(buffer)->bytes = static_cast<uint32_t>(bytes);
  if (bytes > 0) std::memcpy(buffer + sizeof header, data, bytes);
  std::lock_guard<std::mutex> lock(send_mutex_);
  size_t sent = 0;
  const size_t total = sizeof header + bytes;
  while (sent < total) {
    const ssize_t n = ::send(fd_, buffer + sent, total - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return unavailable("writing the round link: " + errno_text());
    }
    sent += static_cast<size_t>(n);
  }
  return Status::ok();
}

bool RoundLink::buffered() const {
  if (in_end_ - in_begin_ < sizeof(RoundMessage)) return false;
  RoundMessage header;
  std::memcpy(&header, in_.data() + in_begin_, sizeof header);
  return header.magic != kRoundMagic || header.bytes > kMaxRoundData ||
         in_end_ - in_begin_ >= sizeof header + header.bytes;  // a bad one returns its error
}

Status RoundLink::receive(RoundMessage& header, std::byte* data) {
  while (true) {
    const size_t have = in_end_ - in_begin_;
    if (have >= sizeof header) {
      std::memcpy(&header, in_.data() + in_begin_, sizeof header);
      if (header.magic != kRoundMagic)
        return data_loss("the round link carried something that is not a round message");
      if (header.bytes > kMaxRoundData)
        return data_loss("a round message of " + std::to_string(header.bytes) +
                         " bytes (at most " + std::to_string(kMaxRoundData) + ")");
      if (have >= sizeof header + header.bytes) {
        std::memcpy(data, in_.data() + in_begin_ + sizeof header, header.bytes);
        in_begin_ += sizeof header + header.bytes;
        if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
        return Status::ok();
      }
    }
    if (in_begin_ > 0) {  // room for a whole message at the end
      std::memmove(in_.data(), in_.data() + in_begin_, have);
      in_begin_ = 0;
      in_end_ = have;
    }
    const ssize_t n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
    if (n == 0) return unavailable("the round link was closed by its peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The receive timeout: nothing started yet may take as long as a round does; a
        // message begun is late only if the peer's host is in trouble.
        if (have == 0) continue;
        return unavailable("the round link stalled inside a message");
      }
      return unavailable("reading the round link: " + errno_text());
    }
    in_end_ += static_cast<size_t>(n);
  }
}

void RoundLink::close() { ::shutdown(fd_, SHUT_RDWR); }

}  // namespace hvrun::detail::agreement

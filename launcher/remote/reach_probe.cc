#include "launcher/remote/reach_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hvrun::launcher {
namespace {

bool parse_target(const std::string& target, sockaddr_in& addr) {
  size_t colon = target.rfind(':');
  if (colon == std::string::npos) return false;
  addr = {};
  addr.sin_family = AF_INET;
  int port = std::atoi(target.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, target.substr(0, colon).c_str(), &addr.sin_addr) == 1;
}

}  // namespace

std::vector<int> open_probe_listeners(std::vector<NetInterface>& interfaces) {
  std::vector<int> fds;
  for (NetInterface& iface : interfaces) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (::inet_pton(AF_INET, iface.address.c_str(), &addr.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        // Probes are never accepted: the kernel completes each handshake into the backlog, and
        // every other host (and the launch host) probes every listener at once, so the backlog
        // must hold one connection per host (SOMAXCONN: the kernel's cap, 4096 by default).
        ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      continue;
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    iface.probe_port = ntohs(addr.sin_port);
    fds.push_back(fd);
  }
  return fds;
}

void close_listeners(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

std::vector<ProbeResult> probe_targets(const std::vector<std::string>& targets,
                                       std::chrono::milliseconds timeout) {
  std::vector<ProbeResult> results(targets.size());
  std::vector<pollfd> polls;
  std::vector<size_t> index;  // polls[i] probes targets[index[i]]
  for (size_t i = 0; i < targets.size(); ++i) {
    results[i].target = targets[i];
    sockaddr_in addr{};
    if (!parse_target(targets[i], addr)) {
      results[i].error = "not an IPv4 address:port";
      continue;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      results[i].error = std::strerror(errno);
      continue;
    }
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      results[i].reached = true;
      ::close(fd);
    } else if (errno == EINPROGRESS) {
      polls.push_back(pollfd{fd, POLLOUT, 0});
      index.push_back(i);
    } else {
      results[i].error = std::strerror(errno);
      ::close(fd);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t pending = polls.size();
  while (pending > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    int n = ::poll(polls.data(), polls.size(), static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (size_t k = 0; k < polls.size(); ++k) {
      if (polls[k].fd < 0 || polls[k].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(polls[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ProbeResult& r = results[index[k]];
      r.reached = err == 0;
      if (err != 0) r.error = std::strerror(err);
      ::close(polls[k].fd);
      polls[k].fd = -1;
      --pending;
    }
  }
  for (size_t k = 0; k < polls.size(); ++k) {
    if (polls[k].fd < 0) continue;
    results[index[k]].error = "no answer within " + std::to_string(timeout.count()) + " ms";
    ::close(polls[k].fd);
  }
  return results;
}

}  // namespace hvrun::launcher

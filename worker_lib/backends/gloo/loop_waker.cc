#include "worker_lib/backends/gloo/loop_waker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

namespace hvrun::detail {
namespace {

class IgnoreEvents final : public gloo::transport::tcp::Handler {
 public:
  void handleEvents(int /*events*/) override {}
};

// Never destroyed: the loop thread may call it until the loop itself is gone, which can be
// after this waker (another holder of the device keeps the loop alive).
gloo::transport::tcp::Handler& ignore_events() {
  static auto* handler = new IgnoreEvents;
  return *handler;
}

}  // namespace

LoopWaker::LoopWaker(gloo::transport::tcp::Device* device) {
  if (device == nullptr) return;
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return;
  try {
    device->registerDescriptor(fd_, EPOLLOUT, &ignore_events());
  } catch (const std::exception&) {
    ::close(fd_);
    fd_ = -1;
  }
}

LoopWaker::~LoopWaker() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hvrun::detail

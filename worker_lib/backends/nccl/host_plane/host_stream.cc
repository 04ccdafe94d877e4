#include "worker_lib/backends/nccl/host_plane/host_stream.h"

#include <pthread.h>

namespace hvrun::detail::cuda {

void HostEvent::complete() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

bool HostEvent::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool HostEvent::wait_for(std::chrono::nanoseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return done_; });
}

HostStream::HostStream(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] {
    // Threads are named in stack dumps; the kernel keeps 15 characters.
    (void)pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
    run();
  });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    interrupted_ = true;  // an event nobody will record any more must not hold the join
  }
  cv_.notify_all();
  thread_.join();
}

void HostStream::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

std::shared_ptr<HostEvent> HostStream::record() {
  auto event = std::make_shared<HostEvent>();
  enqueue([event] { event->complete(); });
  return event;
}

void HostStream::wait(std::shared_ptr<HostEvent> event) {
  enqueue([this, event] {
    // Polls the interrupt between short waits: the event belongs to another stream, whose
    // condition variable this thread cannot share.
    while (!event->wait_for(std::chrono::milliseconds(2))) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (interrupted_) return;
    }
  });
}

void HostStream::interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  interrupted_ = true;
}

void HostStream::run() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued ran
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace hvrun::detail::cuda

#include "coordinator/service/event_dispatcher.h"

namespace hvrun::coordinator::service {

EventDispatcher::EventDispatcher(CoordinatorServer::EventCallback callback)
    : callback_(std::move(callback)) {
  if (callback_) thread_ = std::thread([this] { run(); });
}

EventDispatcher::~EventDispatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventDispatcher::post(CoordinatorEvent event) {
  if (!callback_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(event));
  }
  wake_.notify_one();
}

void EventDispatcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything was delivered
    CoordinatorEvent event = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    callback_(event);
    lock.lock();
  }
}

}  // namespace hvrun::coordinator::service

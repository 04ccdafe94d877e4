#include "python/tf_ops/deadline_watch.h"

#include <pthread.h>

namespace hvrun::tensorflow_ops {

DeadlineWatch& DeadlineWatch::of_process() {
  static DeadlineWatch* watch = new DeadlineWatch();
  return *watch;
}

DeadlineWatch::DeadlineWatch() : thread_([this] { run(); }) {
  pthread_setname_np(thread_.native_handle(), "hvrun-tf-deadln");
  thread_.detach();
}

uint64_t DeadlineWatch::add(Clock::time_point deadline, std::function<void()> expire) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  const bool earliest = by_deadline_.empty() || deadline < by_deadline_.begin()->first;
  by_deadline_.emplace(deadline, id);
  entries_.emplace(id, std::make_pair(deadline, std::move(expire)));
  if (earliest) wake_.notify_one();
  return id;
}

void DeadlineWatch::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto entry = entries_.find(id);
  if (entry == entries_.end()) return;
  by_deadline_.erase({entry->second.first, id});
  entries_.erase(entry);
}

void DeadlineWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (by_deadline_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto [deadline, id] = *by_deadline_.begin();
    if (Clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
      continue;
    }
    by_deadline_.erase(by_deadline_.begin());
    auto entry = entries_.find(id);
    std::function<void()> expire = std::move(entry->second.second);
    entries_.erase(entry);
    lock.unlock();
    expire();
    lock.lock();
  }
}

}  // namespace hvrun::tensorflow_ops

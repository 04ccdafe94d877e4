#include "worker_lib/runtime/death_watch_holder.h"

#include <cerrno>
#include <cstring>

#include "worker_lib/runtime/named_thread.h"

namespace hvrun::detail {

Result<std::unique_ptr<DeathWatchHolder>> DeathWatchHolder::hold(const std::string& assignment) {
  HVRUN_ASSIGN_OR_RETURN(auto where, death_watch::parse_assignment(assignment));
  HVRUN_ASSIGN_OR_RETURN(death_watch::Segment segment, death_watch::Segment::open(where.first));
  if (where.second >= segment.slots())
    return invalid_argument(std::string(death_watch::kEnvironmentVariable) + "=" + assignment +
                            ": the segment has " + std::to_string(segment.slots()) + " slots");
  std::unique_ptr<DeathWatchHolder> holder(new DeathWatchHolder(std::move(segment), where.second));
  holder->thread_ = start_named_thread("hvrun-watched", [h = holder.get()] { h->run(); });
  std::unique_lock<std::mutex> lock(holder->mutex_);
  holder->changed_.wait(lock, [&] { return holder->holding_ || !holder->failure_.is_ok(); });
  if (!holder->failure_.is_ok()) {
    Status failed = holder->failure_;
    lock.unlock();
    return failed;  // the destructor joins the thread, which has ended
  }
  return holder;
}

DeathWatchHolder::~DeathWatchHolder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    releasing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeathWatchHolder::run() {
  death_watch::Slot& slot = segment_.slot(slot_);
  int locked = pthread_mutex_lock(&slot.mutex);
  // A holder of this slot that died: this process's earlier thread cannot have (it unlocks), so
  // the launcher has already seen that death; the slot is this thread's now.
  if (locked == EOWNERDEAD) locked = pthread_mutex_consistent(&slot.mutex);
  std::unique_lock<std::mutex> lock(mutex_);
  if (locked != 0) {
    failure_ = unavailable(std::string("death watch: cannot hold slot ") + std::to_string(slot_) +
                           ": " + std::strerror(locked));
    changed_.notify_all();
    return;
  }
  slot.held.fetch_add(1);
  death_watch::wake_all(slot.held);
  holding_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return releasing_; });
  pthread_mutex_unlock(&slot.mutex);
}

}  // namespace hvrun::detail

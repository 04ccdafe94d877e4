#include "worker_lib/api/op_deadlines.h"

#include <utility>
#include <vector>

#include "worker_lib/runtime/named_thread.h"

namespace hvrun::detail {

OpDeadlines::OpDeadlines(Abort abort) : abort_(std::move(abort)) {}

OpDeadlines::~OpDeadlines() {
  {
    std::lock_guard<std::mutex> lock(table_->mutex);
    table_->stopping = true;
  }
  table_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OpDeadlines::watch(const Handle& handle, std::chrono::milliseconds timeout,
                        const std::string& what) {
  if (timeout.count() <= 0 || handle.poll()) return;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(table_->mutex);
    id = table_->next_id++;
    const auto due = table_->due.emplace(Clock::now() + timeout, id);
    table_->pending.emplace(id, Pending{what, timeout, due});
  }
  std::call_once(started_, [this] { thread_ = start_named_thread("hvrun-deadline", [this] { run(); }); });
  table_->wake.notify_all();
  // Completion drops the entry (at once when the op completed meanwhile).
  handle.on_complete([table = table_, id](const Status&) {
    std::lock_guard<std::mutex> lock(table->mutex);
    if (auto it = table->pending.find(id); it != table->pending.end()) {
      table->due.erase(it->second.due);
      table->pending.erase(it);
    }
  });
}

void OpDeadlines::run() {
  Table& t = *table_;
  std::unique_lock<std::mutex> lock(t.mutex);
  while (!t.stopping) {
    if (t.due.empty()) {
      t.wake.wait(lock);
      continue;
    }
    const Clock::time_point next = t.due.begin()->first;
    if (Clock::now() < next) {
      t.wake.wait_until(lock, next);
      continue;
    }
    std::vector<Pending> expired;
    while (!t.due.empty() && t.due.begin()->first <= Clock::now()) {
      auto it = t.pending.find(t.due.begin()->second);
      t.due.erase(t.due.begin());
      expired.push_back(std::move(it->second));
      t.pending.erase(it);
    }
    lock.unlock();
    for (const Pending& p : expired)
      abort_(p.what + " did not complete within its timeout of " +
             std::to_string(p.timeout.count()) +
             " ms (a per-op timeout: the other ranks cannot finish a collective this rank gave "
             "up on, so the job is aborted; find why the op is held up, or give it more time)");
    lock.lock();
  }
}

}  // namespace hvrun::detail

#include "coordinator/service/autopsy_collector.h"

#include <spdlog/spdlog.h>

namespace hvrun::coordinator::service {

AutopsyCollector::AutopsyCollector(std::chrono::milliseconds deadline, Done done)
    : deadline_(deadline), done_(std::move(done)) {
  thread_ = std::thread([this] { run(); });
}

AutopsyCollector::~AutopsyCollector() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<v1::AutopsyRequest> AutopsyCollector::begin(v1::AutopsyJobReport report,
                                                          std::function<void()> then) {
  v1::AutopsyRequest request;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_ || stopping_) return std::nullopt;
    request.set_id(++last_id_);
    request.set_reason(report.trigger());
    request.set_deadline_ms(deadline_.count());
    report.set_deadline_seconds(static_cast<double>(deadline_.count()) / 1000.0);
    current_ = std::make_unique<v1::AutopsyJobReport>(std::move(report));
    then_ = std::move(then);
    answered_ = 0;
    until_ = std::chrono::steady_clock::now() + deadline_;
  }
  wake_.notify_all();
  return request;
}

void AutopsyCollector::on_report(int rank, const v1::AutopsyReport& report) {
  bool complete = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!current_ || report.id() != last_id_ || rank < 0 || rank >= current_->ranks_size())
      return;
    v1::AutopsyRankEntry* entry = current_->mutable_ranks(rank);
    if (entry->answered()) return;
    entry->set_answered(true);
    *entry->mutable_report() = report;
    complete = ++answered_ == current_->ranks_size();
  }
  if (complete) wake_.notify_all();
}

void AutopsyCollector::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || current_ != nullptr; });
    if (stopping_) return;
    wake_.wait_until(lock, until_, [&] {
      return stopping_ || answered_ == current_->ranks_size();
    });
    // Stopped (the server shuts down): an abort waiting for it has nothing left to end.
    if (stopping_) return;
    std::shared_ptr<const v1::AutopsyJobReport> finished(current_.release());
    std::function<void()> then = std::move(then_);
    then_ = nullptr;
    spdlog::info("autopsy {}: {} of {} ranks answered", last_id_, answered_,
                 finished->ranks_size());
    lock.unlock();
    if (done_) done_(finished);
    if (then) then();
    lock.lock();
  }
}

}  // namespace hvrun::coordinator::service

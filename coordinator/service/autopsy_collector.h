// One job's autopsies (proto/hvrun.proto "Autopsy"): an autopsy begins with the stalls the
// coordinator knows and every rank's identity, the negotiation loop sends every stream the
// request, and the ranks' reports come back here. It is done when every rank answered or the
// deadline passed, whichever is first; `done` then gets the job report (ranks that did not
// answer marked so, for the launcher to look at), on the collector's own thread.
// One autopsy at a time: a request while one collects is refused.
//
// Threads: every method from any thread; `done` on the collector's thread, with no lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "hvrun.pb.h"

namespace hvrun::coordinator::service {

class AutopsyCollector {
 public:
  using Done = std::function<void(std::shared_ptr<const v1::AutopsyJobReport>)>;

  AutopsyCollector(std::chrono::milliseconds deadline, Done done);
  ~AutopsyCollector();
  AutopsyCollector(const AutopsyCollector&) = delete;
  AutopsyCollector& operator=(const AutopsyCollector&) = delete;

  // Starts an autopsy of `report` (trigger, stalls, and one entry per rank with rank, host and
  // pid); returns the request to send every rank, or nullopt when one is under way. `then`, if
  // any, runs on the collector's thread after `done` (the job's abort that waited for it).
  std::optional<v1::AutopsyRequest> begin(v1::AutopsyJobReport report,
                                          std::function<void()> then = nullptr);
  // A rank's answer; answers to another autopsy than the current one are dropped.
  void on_report(int rank, const v1::AutopsyReport& report);
  std::chrono::milliseconds deadline() const { return deadline_; }

 private:
  void run();

  const std::chrono::milliseconds deadline_;
  Done done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t last_id_ = 0;                            // guarded by mutex_
  std::unique_ptr<v1::AutopsyJobReport> current_;  // guarded by mutex_: the one collecting
  std::function<void()> then_;                      // guarded by mutex_: current_'s
  int answered_ = 0;                                // guarded by mutex_
  std::chrono::steady_clock::time_point until_;     // guarded by mutex_
  bool stopping_ = false;                           // guarded by mutex_
  std::thread thread_;
};

}  // namespace hvrun::coordinator::service

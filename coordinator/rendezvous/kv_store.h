// The job's key-value store, for the data planes' bootstrap (Gloo's rendezvous store, NCCL's
// unique id). Every wait is bounded; abort() wakes every waiter with the job's abort status.
//
// Threads: every method may be called from any thread (guarded by mutex_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hvrun::coordinator {

class KvStore {
 public:
  // Sets (or replaces) a key and wakes the waiters.
  void set(const std::string& key, std::string value);
  // Sets several at once, waking the waiters once (a mesh's rank publishes a key per peer).
  void set_many(std::vector<std::pair<std::string, std::string>> entries);

  // Waits until every key exists and returns their values in order; DEADLINE_EXCEEDED naming the
  // missing keys after `timeout` (0 = do not wait); ABORTED when the job is aborted meanwhile.
  // Keys are never removed, so a waiter looks again only from its first missing key: N waiters
  // of N keys each cost O(N^2) lookups in all while N ranks publish, not O(N^3).
  Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout);

  // Keys starting with `prefix`, sorted.
  std::vector<std::string> list(const std::string& prefix) const;

  // Fails every present and future wait with `status` (the first call wins).
  void abort(const Status& status);

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;  // guarded by mutex_
  Status aborted_;                              // guarded by mutex_
};

}  // namespace hvrun::coordinator

#include "coordinator/kv_store.h"

namespace hvrun::coordinator {

void KvStore::set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = std::move(value);
  }
  changed_.notify_all();
}

Result<std::vector<std::string>> KvStore::get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  auto missing_keys = [&] {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!values_.count(key)) missing.push_back(key);
    }
    return missing;
  };
  for (;;) {
    if (!aborted_.is_ok()) return aborted_;
    std::vector<std::string> missing = missing_keys();
    if (missing.empty()) break;
    if (changed_.wait_until(lock, deadline) != std::cv_status::timeout) continue;
    if (!aborted_.is_ok()) return aborted_;
    missing = missing_keys();
    if (missing.empty()) break;
    std::string list;
    for (const auto& key : missing) list += (list.empty() ? "'" : ", '") + key + "'";
    return deadline_exceeded("key-value store: waited " + std::to_string(timeout.count()) +
                             " ms for key(s) " + list +
                             " that no worker set; is every rank running and bootstrapping the "
                             "same backend?");
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(values_.at(key));
  return values;
}

std::vector<std::string> KvStore::list(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> keys;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

void KvStore::abort(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.is_ok()) aborted_ = status;
  }
  changed_.notify_all();
}

}  // namespace hvrun::coordinator

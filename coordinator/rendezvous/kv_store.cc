#include "coordinator/rendezvous/kv_store.h"

namespace hvrun::coordinator {

void KvStore::set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = std::move(value);
  }
  changed_.notify_all();
}

void KvStore::set_many(std::vector<std::pair<std::string, std::string>> entries) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, value] : entries) values_[key] = std::move(value);
  }
  changed_.notify_all();
}

Result<std::vector<std::string>> KvStore::get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  size_t present = 0;  // keys[0, present) exist (and stay)
  auto all_present = [&] {
    while (present < keys.size() && values_.count(keys[present]) != 0) ++present;
    return present == keys.size();
  };
  for (;;) {
    if (!aborted_.is_ok()) return aborted_;
    if (all_present()) break;
    if (changed_.wait_until(lock, deadline) != std::cv_status::timeout) continue;
    if (!aborted_.is_ok()) return aborted_;
    if (all_present()) break;
    constexpr size_t kKeysNamed = 8;
    std::string list;
    size_t missing = 0;
    for (size_t i = present; i < keys.size(); ++i) {
      if (values_.count(keys[i]) != 0) continue;
      if (++missing <= kKeysNamed) list += (list.empty() ? "'" : ", '") + keys[i] + "'";
    }
    if (missing > kKeysNamed) list += " and " + std::to_string(missing - kKeysNamed) + " more";
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

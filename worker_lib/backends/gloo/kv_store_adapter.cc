#include "worker_lib/backends/gloo/kv_store_adapter.h"

#include <stdexcept>

namespace hvrun::detail {

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  Status s = store_.set(key, std::string(data.begin(), data.end()));
  if (!s.is_ok()) throw std::runtime_error("store set '" + key + "': " + s.to_string());
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  auto values = store_.get({key}, default_timeout_);
  if (!values.is_ok())
    throw std::runtime_error("store get '" + key + "': " + values.status().to_string());
  const std::string& v = values->at(0);
  return std::vector<char>(v.begin(), v.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  auto values = store_.get(keys, timeout);
  if (!values.is_ok()) throw std::runtime_error("store wait: " + values.status().to_string());
}

}  // namespace hvrun::detail

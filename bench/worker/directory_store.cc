#include "bench/worker/directory_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace hvrun::bench {

DirectoryStore::DirectoryStore(std::string dir) : dir_(std::move(dir)) {
  std::filesystem::create_directories(dir_);
}

hvrun::Status DirectoryStore::set(const std::string& key, const std::string& value) {
  const std::string path = file(key);
  {
    std::ofstream out(path + ".tmp", std::ios::binary);
    out << value;
    if (!out) return hvrun::unavailable("cannot write " + path);
  }
  std::filesystem::rename(path + ".tmp", path);
  return hvrun::Status::ok();
}

hvrun::Result<std::vector<std::string>> DirectoryStore::get(const std::vector<std::string>& keys,
                                                            std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> values;
  for (const auto& key : keys) {
    while (!std::filesystem::exists(file(key))) {
      if (std::chrono::steady_clock::now() > deadline)
        return hvrun::deadline_exceeded("no key " + key + " in " + dir_);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // bootstrap only
    }
    std::ifstream in(file(key), std::ios::binary);
    values.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return values;
}

std::string DirectoryStore::file(std::string key) const {
  std::replace(key.begin(), key.end(), '/', '_');
  return dir_ + "/" + key;
}

}  // namespace hvrun::bench

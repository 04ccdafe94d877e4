#include "launcher/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include "common/logging.h"

namespace hvrun::launcher {
namespace {

// The value of KEY in "KEY=VALUE" entries, or null.
const char* env_value(const std::vector<std::string>& envp, const std::string& key) {
  for (const std::string& kv : envp)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.c_str() + key.size() + 1;
  return nullptr;
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> cpu_block(const std::vector<int>& allowed, int local_rank, int local_size) {
  const int n = static_cast<int>(allowed.size());
  if (local_size <= 0 || local_rank < 0 || local_rank >= local_size || n < local_size) return {};
  const int per = n / local_size, extra = n % local_size;
  const int first = local_rank * per + std::min(local_rank, extra);
  const int count = per + (local_rank < extra ? 1 : 0);
  return std::vector<int>(allowed.begin() + first, allowed.begin() + first + count);
}

std::vector<int> binding_for_worker(const std::vector<std::string>& envp) {
  const char* mode = env_value(envp, "HVRUN_BIND_TO");
  if (mode == nullptr || std::string(mode) != "block") return {};
  const char* rank = env_value(envp, "HVRUN_LOCAL_RANK");
  const char* size = env_value(envp, "HVRUN_LOCAL_SIZE");
  if (rank == nullptr || size == nullptr) return {};
  const std::vector<int> allowed = allowed_cpus();
  std::vector<int> cpus = cpu_block(allowed, std::atoi(rank), std::atoi(size));
  if (cpus.empty())
    spdlog::warn("--bind-to block: {} ranks on this host but hvrun may use only {} CPUs ({}); "
                 "local rank {} is not bound",
                 size, allowed.size(), cpu_list_text(allowed), rank);
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace hvrun::launcher

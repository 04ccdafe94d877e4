#include "launcher/plan/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

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

// An integer from a sysfs file, or -1.
int sysfs_int(const std::string& path) {
  std::ifstream in(path);
  int value = -1;
  return in >> value ? value : -1;
}

// Shares out `units` (cores, or single CPUs) in contiguous blocks.
std::vector<int> share(const std::vector<std::vector<int>>& units, int local_rank,
                       int local_size) {
  const int n = static_cast<int>(units.size());
  const int per = n / local_size, extra = n % local_size;
  const int first = local_rank * per + std::min(local_rank, extra);
  const int count = per + (local_rank < extra ? 1 : 0);
  std::vector<int> cpus;
  for (int u = first; u < first + count; ++u) cpus.insert(cpus.end(), units[u].begin(), units[u].end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

}  // namespace

std::vector<std::vector<int>> cores_of(const std::vector<int>& allowed) {
  std::map<std::pair<int, int>, std::vector<int>> by_core;  // (package, core id) -> its CPUs
  std::vector<std::vector<int>> cores;
  for (int cpu : allowed) {
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int package = sysfs_int(topology + "physical_package_id");
    const int core = sysfs_int(topology + "core_id");
    if (package < 0 || core < 0) {
      cores.push_back({cpu});  // unknown: a core of its own
      continue;
    }
    by_core[{package, core}].push_back(cpu);
  }
  for (auto& [key, cpus] : by_core) cores.push_back(std::move(cpus));
  std::sort(cores.begin(), cores.end());  // by first CPU (each list ascending)
  return cores;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> cpu_block(const std::vector<std::vector<int>>& cores, int local_rank,
                           int local_size) {
  if (local_size <= 0 || local_rank < 0 || local_rank >= local_size) return {};
  if (static_cast<int>(cores.size()) >= local_size) return share(cores, local_rank, local_size);
  std::vector<std::vector<int>> threads;  // fewer cores than ranks: hardware threads instead
  for (const auto& core : cores)
    for (int cpu : core) threads.push_back({cpu});
  std::sort(threads.begin(), threads.end());
  if (static_cast<int>(threads.size()) < local_size) return {};
  return share(threads, local_rank, local_size);
}

std::vector<int> binding_for_worker(const std::vector<std::string>& envp) {
  const char* mode = env_value(envp, "HVRUN_BIND_TO");
  if (mode == nullptr || std::string(mode) != "block") return {};
  const char* rank = env_value(envp, "HVRUN_LOCAL_RANK");
  const char* size = env_value(envp, "HVRUN_LOCAL_SIZE");
  if (rank == nullptr || size == nullptr) return {};
  const std::vector<int> allowed = allowed_cpus();
  std::vector<int> cpus = cpu_block(cores_of(allowed), std::atoi(rank), std::atoi(size));
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

#include "launcher/process/own_children.h"

#include <mutex>
#include <unordered_map>

#include "launcher/process/proc_table.h"

namespace hvrun::launcher {
namespace {

struct OwnChildren {
  std::mutex mutex;
  std::unordered_map<pid_t, unsigned long long> start_times;  // guarded by mutex
};

OwnChildren& own_children() {
  static OwnChildren* children = new OwnChildren;  // never destroyed: threads may outlive main
  return *children;
}

}  // namespace

void record_own_child(pid_t pid) {
  if (pid <= 0) return;
  const unsigned long long started = process_start_time(pid);
  OwnChildren& own = own_children();
  std::lock_guard<std::mutex> lock(own.mutex);
  own.start_times[pid] = started;
}

bool is_own_child(pid_t pid) {
  OwnChildren& own = own_children();
  unsigned long long recorded = 0;
  {
    std::lock_guard<std::mutex> lock(own.mutex);
    auto it = own.start_times.find(pid);
    if (it == own.start_times.end()) return false;
    recorded = it->second;
  }
  // 0: unreadable when recorded (it had exited already) or now; trust the pid then.
  const unsigned long long now = process_start_time(pid);
  return recorded == 0 || now == 0 || recorded == now;
}

}  // namespace hvrun::launcher

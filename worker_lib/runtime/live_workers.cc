#include "worker_lib/runtime/live_workers.h"

#include <map>
#include <mutex>

namespace hvrun::detail {
namespace {

struct LiveWorker {
  int rank = -1;  // -1 while its init still runs
  std::string job_id;
};

std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Coordinator address -> the live worker. Guarded by table_mutex().
std::map<std::string, LiveWorker>& table() {
  static auto* live = new std::map<std::string, LiveWorker>;  // outlives static destructors
  return *live;
}

}  // namespace

Result<std::unique_ptr<LiveWorkerClaim>> LiveWorkerClaim::claim(
    const std::string& coordinator_address) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto [it, inserted] = table().try_emplace(coordinator_address);
  if (!inserted) {
    const LiveWorker& live = it->second;
    const std::string who = live.rank < 0 ? "a worker still in init()"
                                          : "rank " + std::to_string(live.rank) + " of job " +
                                                live.job_id;
    return already_exists("hvrun worker: init() called again while this process already has " +
                          who + " connected to the coordinator at " + coordinator_address +
                          " (no shutdown() in between); keep using that worker, or call "
                          "shutdown() on it before init() again");
  }
  return std::unique_ptr<LiveWorkerClaim>(new LiveWorkerClaim(coordinator_address));
}

LiveWorkerClaim::~LiveWorkerClaim() {
  std::lock_guard<std::mutex> lock(table_mutex());
  table().erase(address_);
}

void LiveWorkerClaim::set_identity(int rank, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(table_mutex());
  LiveWorker& live = table()[address_];
  live.rank = rank;
  live.job_id = job_id;
}

}  // namespace hvrun::detail

// Which coordinators this process has a live worker for (initialized, not shut down).
//
// A second init() for the same job while the first worker lives would register as a new
// round (init after shutdown) and wait, up to the start timeout, for a round that cannot end
// while this process keeps its first worker; refusing it at once is the only useful answer.
//
// Threads: any; the table has its own mutex.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace hvrun::detail {

// Held by a worker from the start of its init to the end of its shutdown.
class LiveWorkerClaim {
 public:
  // kAlreadyExists when this process already holds a claim on `coordinator_address`.
  static Result<std::unique_ptr<LiveWorkerClaim>> claim(const std::string& coordinator_address);
  ~LiveWorkerClaim();
  LiveWorkerClaim(const LiveWorkerClaim&) = delete;
  LiveWorkerClaim& operator=(const LiveWorkerClaim&) = delete;

  // Once registered: named in the refusal of a later init.
  void set_identity(int rank, const std::string& job_id);

 private:
  explicit LiveWorkerClaim(std::string address) : address_(std::move(address)) {}
  std::string address_;
};

}  // namespace hvrun::detail

// Assembles one runtime's parts (runtime_parts.h) from the job's state, in dependency order:
//   1. register with the coordinator (the topology, the coordinator's settings)
//   2. the data planes: the CPU backend, the executors (CPU, GPU), the process sets' planes
//   3. telemetry and the flight recorder, which the executors and the submitter report to
//   4. the Negotiate stream, opened with Hello
//   5. the negotiation parts around the shared work state: submitter, fast path, cached
//      rounds, background loop, heartbeat, autopsy responder, reader
// Nothing is started: RuntimeLifecycle::start starts the threads once every part exists, and
// a build that fails part way leaves parts that RuntimeLifecycle::shutdown stops safely.
#pragma once

#include "common/status.h"
#include "worker_lib/runtime/lifecycle.h"
#include "worker_lib/runtime/registration.h"
#include "worker_lib/runtime/runtime_parts.h"

namespace hvrun::detail {

class RuntimeBuilder {
 public:
  // `lifecycle`: the parts' own, which the reader's tear-down and end callbacks reach.
  RuntimeBuilder(RuntimeParts& parts, RuntimeLifecycle& lifecycle)
      : parts_(parts), lifecycle_(lifecycle) {}

  Status build();

 private:
  Status register_rank();
  Status build_data_planes();
  // Telemetry counts CPU responses under the backend's short name; a one-rank job moves
  // nothing ("local").
  std::string backend_short_name() const;
  void build_telemetry(ProcessSetPlanes::Job& set_job);
  Status open_stream();
  Status build_negotiation();
  // The job's round agreement, or null (a job of one rank: nobody to agree with).
  RoundAgreement* rounds() const;

  RuntimeParts& parts_;
  RuntimeLifecycle& lifecycle_;
  Registration registered_;
  RoundAgreement* plane_rounds_ = nullptr;  // the CPU data plane's round agreement
};

}  // namespace hvrun::detail

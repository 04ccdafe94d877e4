// The background thread (`hvrun-loop`): woken by a submission, a message from the reader, an
// abort or shutdown, it sends what waits to be sent (the outbox, an AbortRequest) and executes
// every Plan's responses in order (PlanExecutor), completing the handles. Each plan runs under
// the executor's lock and counts as one event of the fast path's rounds (execution_lane.h).
// Every rank receives every process set's responses and runs those of its sets, through the
// set's executor (process_set_planes.h), in plan order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "hvrun.pb.h"
#include "worker_lib/agreement/cached_rounds.h"
#include "worker_lib/agreement/execution_lane.h"
#include "worker_lib/execution/plan_executor.h"
#include "worker_lib/runtime/cached_tensor_names.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/process_set_planes.h"
#include "worker_lib/runtime/submitter.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class PlanRunner {
 public:
  struct Context {
    WorkState& state;
    ExecutionLane& lane;
    Submitter& submitter;
    CachedRounds& rounds;  // sends the outbox, or runs it through agreed rounds
    PlanExecutor& executor;        // the global set's
    ProcessSetPlanes& process_sets;  // the other sets' executors
    telemetry::WorkerTelemetry& telemetry;
    NegotiationStream& stream;
    CoordinatorClient& client;  // an AbortRequest when the stream cannot take it
    int rank = 0;
    std::string host;
    std::string coordinator_address;
    // The job's cycle time: how long asynchronous submissions that may run by agreement
    // gather before this thread runs them (0: at once).
    std::chrono::microseconds cycle_time{0};
  };
  explicit PlanRunner(Context context) : c_(std::move(context)) {}

  void start();
  bool started() const { return thread_.joinable(); }
  // After WorkState::request_stop.
  void join() { thread_.join(); }
  // After join(): a plan this rank takes part in went unexecuted (it arrived after the runtime
  // stopped taking work, or waits in the inbox), so peers may wait for this rank in it.
  bool left_peers_waiting();
  // The last plan fully executed (the heartbeat reports it). Any thread.
  const std::atomic<uint64_t>& finished_plan_seq() const { return finished_plan_seq_; }
  // Whether submissions that may run by agreement gather for the cycle time; then only the
  // first of a batch wakes this thread, and those joining it while it gathers do not
  // (Submitter::let_batches_gather).
  bool gathering() const;

 private:
  void loop();
  // `state.mutex` held: whether the outbox should gather for the cycle time first.
  bool gathers() const;
  void send_abort_request(const std::string& reason);
  void handle_message(v1::CoordinatorMessage& message);
  void execute_plan(v1::Plan& plan);
  // The executor of the response's process set, or null when this rank is not in it.
  PlanExecutor* executor_for(const v1::Response& response);
  // A process set added or removed by every rank (entries: this rank's call).
  void change_process_sets(const v1::Response& response, const ResponseEntries& entries);

  Context c_;
  CachedTensorNames cached_names_;
  uint64_t last_plan_seq_ = 0;  // this thread only
  bool skipped_plan_ = false;   // this thread, then (after join) shutdown
  std::atomic<uint64_t> finished_plan_seq_{0};
  std::thread thread_;
};

}  // namespace hvrun::detail

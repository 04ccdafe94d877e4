// The reader thread (`hvrun-reader`): it only blocks in the Negotiate stream's Read() (gRPC's
// synchronous API cannot wait for a message and a wake-up at once) and hands each message to
// the background thread through WorkState's inbox. A JobAbort tears the data plane down at
// once, so a collective the background thread is blocked in fails promptly with the abort's
// reason; plans received before it still run in order (barriers complete, collectives fail),
// then every other handle fails. The stream ending while the worker did not shut down
// (coordinator gone) fails every handle at once, naming the coordinator's address, and tears
// the data plane down too.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/status.h"
#include "hvrun.pb.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/report_sender.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

// A JobAbort as the status every failed handle carries (names the rank it blames).
Status job_abort_status(const v1::JobAbort& abort);

class StreamReader {
 public:
  struct Context {
    WorkState& state;
    NegotiationStream& stream;
    telemetry::WorkerTelemetry& telemetry;
    telemetry::ReportSender& reporter;
    // Tears this rank's data planes down (any thread): collectives in progress fail at once.
    // membership_changed: the JobAbort of an elastic membership change.
    std::function<void(const std::string& reason, bool membership_changed)> tear_down;
    // The stream has ended (after WorkState::stream_ended is set).
    std::function<void()> on_end;
    // Whether this rank's shutdown has begun: a stream that ends then ends as asked.
    std::function<bool()> stopping;
    int rank = 0;
    std::string coordinator_address;
    // An AutopsyRequest arrived (worker_lib/autopsy/responder.h); must not block.
    std::function<void(const v1::AutopsyRequest&)> on_autopsy;
  };
  explicit StreamReader(Context context) : c_(std::move(context)) {}

  void start();
  void join() { thread_.join(); }
  // Elastic jobs: the coordinator said slots were added since this init (Worker::hosts_updated),
  // read by the trainer at its next commit. Any thread.
  bool hosts_updated() const { return hosts_updated_.load(std::memory_order_acquire); }

 private:
  void read();
  // Once the stream ended with neither Goodbye nor JobAbort: why, in words that say who ended
  // it (from the stream's final status).
  Status stream_lost_status();

  Context c_;
  std::atomic<bool> hosts_updated_{false};
  std::thread thread_;
};

}  // namespace hvrun::detail

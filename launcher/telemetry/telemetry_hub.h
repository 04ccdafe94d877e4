// Where hvrun's /metrics endpoint and end-of-job summary get their JobTelemetry: the coordinator
// of the attempt that runs now, or, between attempts and after the job, the last snapshot of the
// attempt that ended. One hub lives for the whole hvrun run, across --max-restarts attempts, so a
// Prometheus scraping hvrun sees one target whose hvrun_restarts_total counts up.
//
// Thread-safe: attach/detach on the launcher's thread, snapshot() from the metrics server's.
#pragma once

#include <functional>
#include <mutex>

#include "coordinator/telemetry/job_telemetry.h"

namespace hvrun::launcher {

using coordinator::telemetry::JobTelemetry;

class TelemetryHub {
 public:
  using Source = std::function<JobTelemetry()>;

  // The running attempt's coordinator. Called under the hub's lock, so detach() never returns
  // while a scrape still uses it.
  void attach(Source source);
  // Takes the source's final snapshot and keeps it; snapshots come from it from now on.
  void detach();
  void set_restarts(int restarts);

  // The live source's snapshot, else the last kept; `restarts` filled in.
  JobTelemetry snapshot() const;

 private:
  mutable std::mutex mutex_;
  Source source_;
  JobTelemetry last_;
  int restarts_ = 0;
};

// Attaches a source for one scope (one attempt): detaches on every way out of it. Declare it
// after whatever the source reads, so that is still alive when the final snapshot is taken.
class ScopedTelemetrySource {
 public:
  ScopedTelemetrySource(TelemetryHub* hub, TelemetryHub::Source source) : hub_(hub) {
    if (hub_ != nullptr) hub_->attach(std::move(source));
  }
  ~ScopedTelemetrySource() {
    if (hub_ != nullptr) hub_->detach();
  }
  ScopedTelemetrySource(const ScopedTelemetrySource&) = delete;
  ScopedTelemetrySource& operator=(const ScopedTelemetrySource&) = delete;

 private:
  TelemetryHub* hub_;
};

}  // namespace hvrun::launcher

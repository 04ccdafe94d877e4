#include "launcher/telemetry/telemetry_hub.h"

namespace hvrun::launcher {

void TelemetryHub::attach(Source source) {
  std::lock_guard<std::mutex> lock(mutex_);
  source_ = std::move(source);
}

void TelemetryHub::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!source_) return;
  last_ = source_();
  source_ = nullptr;
}

void TelemetryHub::set_restarts(int restarts) {
  std::lock_guard<std::mutex> lock(mutex_);
  restarts_ = restarts;
}

JobTelemetry TelemetryHub::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  JobTelemetry job = source_ ? source_() : last_;
  job.restarts = restarts_;
  return job;
}

}  // namespace hvrun::launcher

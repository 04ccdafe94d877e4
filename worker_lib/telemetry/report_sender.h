// Sends a worker's TelemetryReport on its Negotiate stream: every `interval` when
// something changed (and at least every few seconds, so the coordinator sees the rank is
// reporting), at once when timeline events pile up, and a last one at shutdown, before the
// runtime's Goodbye.
//
// Threads: its own thread ("hvrun-telemetry"); wake() and flush_and_stop() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail::telemetry {

class ReportSender {
 public:
  // Writes one message on the stream; false when the stream is closed.
  using Send = std::function<bool(const v1::WorkerMessage&)>;
  // Latest GPU samples (NVML); empty without. Called at most once per second.
  using GpuSampler = std::function<std::vector<v1::GpuSample>()>;

  ReportSender(WorkerTelemetry& telemetry, Send send, std::chrono::milliseconds interval,
               GpuSampler gpus = nullptr);
  ~ReportSender();  // stops without a last report
  ReportSender(const ReportSender&) = delete;
  ReportSender& operator=(const ReportSender&) = delete;

  void start();
  // Events piled up: send soon.
  void wake();
  // Send a report soon even when nothing changed (the timeline stopped: the coordinator waits
  // for every rank's last events before closing the file).
  void request_report();
  // Stops the thread, then sends a last report when anything changed since the previous one.
  // Idempotent.
  void flush_and_stop();

 private:
  void run();
  // Builds and sends one report; false when the stream is closed.
  bool send_report(bool with_gpus);
  void stop_thread();

  WorkerTelemetry& telemetry_;
  Send send_;
  const std::chrono::milliseconds interval_;
  GpuSampler gpus_;
  std::vector<v1::GpuSample> last_gpus_;  // sender thread (or the flusher after it stopped)

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;       // mutex_
  bool woken_ = false;      // mutex_
  bool forced_ = false;     // mutex_: request_report()
  bool stream_closed_ = false;  // mutex_
  bool flushed_ = false;    // mutex_
  std::thread thread_;
};

}  // namespace hvrun::detail::telemetry

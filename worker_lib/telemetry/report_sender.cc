#include "worker_lib/telemetry/report_sender.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "common/logging.h"

namespace hvrun::detail::telemetry {
namespace {
// Even when nothing changed, report this often: the coordinator's "seconds since report" and
// the GPU samples stay fresh.
constexpr std::chrono::seconds kKeepAlive{5};
constexpr std::chrono::seconds kGpuPeriod{1};
constexpr std::chrono::milliseconds kRecordingInterval{100};
}  // namespace

ReportSender::ReportSender(WorkerTelemetry& telemetry, Send send, std::chrono::milliseconds interval,
                           GpuSampler gpus)
    : telemetry_(telemetry), send_(std::move(send)), interval_(interval), gpus_(std::move(gpus)) {}

ReportSender::~ReportSender() { stop_thread(); }

void ReportSender::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-telemetry");
    run();
  });
}

void ReportSender::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ReportSender::request_report() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
    forced_ = true;
  }
  cv_.notify_all();
}

void ReportSender::stop_thread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReportSender::flush_and_stop() {
  stop_thread();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (flushed_ || stream_closed_) return;
    flushed_ = true;
  }
  if (telemetry_.changed()) (void)send_report(false);
}

bool ReportSender::send_report(bool with_gpus) {
  v1::WorkerMessage message;
  v1::TelemetryReport* report = message.mutable_telemetry();
  *report = telemetry_.take_report();
  if (with_gpus && gpus_) {
    last_gpus_ = gpus_();
    if (last_gpus_.empty()) gpus_ = nullptr;  // no NVML or no GPU: stop asking
  }
  for (const auto& gpu : last_gpus_) *report->add_gpus() = gpu;
  const bool sent = send_(message);
  if (!sent) SPDLOG_DEBUG("telemetry report not sent: stream closed");
  return sent;
}

void ReportSender::run() {
  auto last_sent = std::chrono::steady_clock::now();
  auto last_gpu = last_sent - kGpuPeriod;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    // While the timeline records, events flow: send them often, so a rank that dies (SIGTERM,
    // SIGKILL) loses at most this much of its timeline.
    const auto interval = telemetry_.recording() ? std::min(interval_, kRecordingInterval) : interval_;
    cv_.wait_for(lock, interval, [&] { return stop_ || woken_; });
    if (stop_) break;
    woken_ = false;
    const bool forced = std::exchange(forced_, false);
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    const bool gpu_due = gpus_ != nullptr && now - last_gpu >= kGpuPeriod;
    bool sent = true;
    if (forced || gpu_due || telemetry_.changed() || now - last_sent >= kKeepAlive) {
      if (gpu_due) last_gpu = now;
      sent = send_report(gpu_due);
      last_sent = now;
    }
    lock.lock();
    if (!sent) {
      stream_closed_ = true;
      break;
    }
  }
}

}  // namespace hvrun::detail::telemetry

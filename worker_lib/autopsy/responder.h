// A rank's answer to an autopsy (AutopsyRequest in proto/hvrun.proto): its flight recorder's
// ring, the collectives it waits in, and every thread's state (/proc), native stack
// (thread_stacks.h, symbolizer.h) and interpreter stack (interpreter_stacks.h). Answered on a
// thread of its own (`hvrun-autopsy`), so that neither the reader thread nor the background
// thread (maybe the stuck one) does the work, and within the request's deadline: stacks that
// take longer are left out with a note.
//
// Threads: request() from the reader thread; stop() from shutdown (joins the thread).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hvrun.pb.h"
#include "worker_lib/autopsy/flight_recorder.h"

namespace hvrun::detail {

// What one rank reports; `recorder` may be null (the recorder is off).
v1::AutopsyReport build_autopsy_report(const v1::AutopsyRequest& request,
                                       const FlightRecorder* recorder, int rank,
                                       const std::string& host);

class AutopsyResponder {
 public:
  struct Context {
    const FlightRecorder* recorder = nullptr;
    // Writes on the negotiation stream; false once it is closed.
    std::function<bool(const v1::WorkerMessage&)> send;
    int rank = 0;
    std::string host;
  };
  explicit AutopsyResponder(Context context);
  ~AutopsyResponder() { stop(); }
  AutopsyResponder(const AutopsyResponder&) = delete;
  AutopsyResponder& operator=(const AutopsyResponder&) = delete;

  void request(const v1::AutopsyRequest& request);
  void stop();

 private:
  void run();

  Context c_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<v1::AutopsyRequest> requests_;  // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
  std::thread thread_;
};

}  // namespace hvrun::detail

// Delivers CoordinatorEvents to the owner's callback on a thread of its own, in order, so that
// whoever triggers an event (the launcher calling abort() under its own lock, a gRPC thread)
// never runs the owner's code on its stack.
//
// Threads: post() from any thread; the callback runs on the dispatcher's thread. The destructor
// delivers what was posted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "coordinator/service/coordinator_server.h"

namespace hvrun::coordinator::service {

class EventDispatcher {
 public:
  explicit EventDispatcher(CoordinatorServer::EventCallback callback);
  ~EventDispatcher();
  EventDispatcher(const EventDispatcher&) = delete;
  EventDispatcher& operator=(const EventDispatcher&) = delete;

  void post(CoordinatorEvent event);

 private:
  void run();

  CoordinatorServer::EventCallback callback_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<CoordinatorEvent> queue_;  // guarded by mutex_
  bool stopping_ = false;               // guarded by mutex_
  std::thread thread_;
};

}  // namespace hvrun::coordinator::service

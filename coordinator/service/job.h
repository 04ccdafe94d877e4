// One job's coordinator state, shared by the gRPC handlers: rendezvous, key-value store,
// negotiation loop, who is connected, how the job ended, and the owner's event callback.
//
// Threads: every method may be called from any thread; mutex_ guards the end state.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "coordinator/kv_store.h"
#include "coordinator/rendezvous.h"
#include "coordinator/server.h"
#include "coordinator/service/event_dispatcher.h"
#include "coordinator/service/negotiation_loop.h"

namespace hvrun::coordinator::service {

class Job {
 public:
  Job(CoordinatorOptions options, CoordinatorServer::EventCallback on_event);
  ~Job();

  const CoordinatorOptions& options() const { return options_; }
  Rendezvous& rendezvous() { return rendezvous_; }
  KvStore& kv() { return kv_; }
  NegotiationLoop& loop() { return loop_; }

  // Job-wide abort: first reason wins; every stream, waiter and later caller gets it.
  void abort(const std::string& reason, int rank, const std::string& host);
  // The server stops: ends a running job with CANCELLED (streams hear it), without an event.
  void shutdown();
  // A stream ended without Goodbye.
  void worker_lost(int rank);
  // The job's end: OK (every rank left cleanly) or why it failed; nullopt while it runs.
  std::optional<Status> end_status() const;
  std::optional<Status> wait_for_end(std::chrono::milliseconds timeout);

 private:
  void emit(CoordinatorEvent event);
  void end(Status status);  // records the end (first wins) and fails every waiter with it

  const CoordinatorOptions options_;
  EventDispatcher events_;  // declared before what posts to it: outlives them, delivers all
  Rendezvous rendezvous_;
  KvStore kv_;
  NegotiationLoop loop_;

  mutable std::mutex mutex_;
  std::condition_variable ended_cv_;
  std::optional<Status> end_;  // guarded by mutex_
  bool aborting_ = false;      // guarded by mutex_: the first abort() won
};

}  // namespace hvrun::coordinator::service

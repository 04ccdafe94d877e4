// A Gloo mesh of every rank connected on first use: the planes that connect only some pairs at
// start (the hierarchical one's leaders, a sparse Gloo plane) run allgatherv and alltoallv, which
// need every pair, on it. Its N^2 connections and their addresses are paid only by a job that
// uses those collectives; every rank runs the same plans in the same order, so every rank makes
// that first call, and connects, together.
//
// Threads: one thread at a time runs collectives (and so get()); abort() may come from any
// thread, hence the lock around the pointer, not around the connecting.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "worker_lib/backend.h"

namespace hvrun::detail {

class LazyMesh {
 public:
  // Connects the mesh (blocks until every rank did, bounded).
  using Connect = std::function<Result<std::unique_ptr<Backend>>()>;
  // `why`: logged (debug) when it connects, e.g. "hierarchical data plane: connecting ...".
  LazyMesh(Connect connect, std::string why) : connect_(std::move(connect)), why_(std::move(why)) {}

  // The mesh, connected now if it was not yet; kAborted after abort().
  Result<Backend*> get();
  // Aborts the mesh if connected, and fails any later get().
  void abort(const std::string& reason);

 private:
  Connect connect_;
  std::string why_;
  std::mutex mutex_;
  std::unique_ptr<Backend> mesh_;  // guarded by mutex_
  std::string aborted_;            // guarded by mutex_
};

}  // namespace hvrun::detail

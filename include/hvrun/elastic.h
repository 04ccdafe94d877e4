// Elastic trainers in C++ (docs/elastic.md): the state a trainer keeps across membership
// changes, and the loop that resets it, as Horovod's elastic State and run.
//
//   hvrun::elastic::State state;
//   state.add("weights", weights.data(), weights.size() * sizeof(float));
//   state.add("step", &step, sizeof step);
//   hvrun::Status s = hvrun::elastic::run(state, [&](hvrun::Worker& w, hvrun::elastic::State& st) {
//     for (; step < steps; ++step) {
//       HVRUN_RETURN_IF_ERROR(w.allreduce("grad", grad_view, {.op = hvrun::ReduceOp::kAverage}));
//       ...update weights...
//       if (step % 10 == 0) HVRUN_RETURN_IF_ERROR(st.commit(w));
//     }
//     return hvrun::Status::ok();
//   });
//
// A lost rank makes every survivor's collectives fail with UNAVAILABLE ("the job's membership
// changed: ..."): run() then restores the last commit, shuts the worker down, initialises a new
// one (the next membership's rendezvous: rank and size may change), runs the reset callbacks,
// syncs rank 0's state (the oldest survivor's) to every rank and calls the function again. A
// commit that learns of added slots returns UNAVAILABLE too (hosts_updated()): run() resets
// without restoring. Any other error is the program's own (tensors whose shapes differ between
// ranks, a refused call) and is returned: a reset would meet it again. Outside an elastic job
// (hvrun without --min-np/--max-np/--host-discovery-script) run() calls the function once.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hvrun/status.h"
#include "hvrun/hvrun.h"

namespace hvrun::elastic {

class State {
 public:
  // Registers `bytes` at `data` as part of the state: committed (copied), restored and synced as
  // bytes. Every rank registers the same names, in the same order, with the same sizes.
  Status add(const std::string& name, void* data, size_t bytes);

  // Copies every buffer, then asks whether slots were added to the job (every rank agrees: one
  // small allreduce). OK, or UNAVAILABLE when the trainer must reset now (return it to run()).
  Status commit(Worker& worker);
  // Every buffer back to its last commit (or to what add() found, before any commit).
  void restore();
  // Rank 0's buffers to every rank (a broadcast each), then a commit of them without the
  // question to the job.
  Status sync(Worker& worker);

  // Runs after every reset, with the new worker (rescale a learning rate by its size()).
  void on_reset(std::function<void(Worker&)> callback);
  // The last commit() returned UNAVAILABLE because slots were added.
  bool hosts_updated() const { return hosts_updated_; }

 private:
  friend Status run(State&, const std::function<Status(Worker&, State&)>&, const Config*);
  struct Buffer {
    std::string name;
    void* data;
    size_t bytes;
    std::vector<unsigned char> committed;
  };
  void save();
  std::vector<Buffer> buffers_;
  std::vector<std::function<void(Worker&)>> callbacks_;
  bool hosts_updated_ = false;
};

// True in a job hvrun started elastic (HVRUN_ELASTIC=1).
bool in_elastic_job();

// Initialises a worker (from the environment, or `config`), then calls `train` as described
// above until it returns OK or an error no reset can mend; shuts the worker down at the end.
Status run(State& state, const std::function<Status(Worker&, State&)>& train,
           const Config* config = nullptr);

}  // namespace hvrun::elastic

// Checkpoints for restarts: save a trainer's state every K steps, and after a restart
// (hvrun --max-restarts) resume from the newest complete one.
//
//   hvrun::Checkpointer ckpt(*worker, *hvrun::CheckpointOptions::from_environment());
//   ckpt.add("weights", weights.data(), weights.size() * sizeof(float));
//   ckpt.add("step_state", &optimizer_state, sizeof optimizer_state);
//   int64_t first = ckpt.restore()->value_or(-1) + 1;   // every rank: rank 0 loads, broadcasts
//   for (int64_t step = first; step < steps; ++step) { ...train...; ckpt.save_if_due(step); }
//
// Rank 0 writes (the state of data-parallel ranks is identical). A file appears only complete:
// written to a temporary name, fsynced, renamed. restore() skips files that are truncated,
// corrupt, or from another run, world size or set of buffers (saying why) and takes the newest
// good one; it returns the step that checkpoint was saved at, or nullopt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/status.h"
#include "hvrun/hvrun.h"

namespace hvrun {

struct CheckpointOptions {
  std::string directory;  // empty: checkpoints are off (save and restore do nothing)
  int64_t every = 0;      // save_if_due(step) saves when step % every == 0 (0: never)
  int keep = 3;           // newest checkpoints kept; older ones are removed after a save
  // Part of a checkpoint's identity: files saved under another name are not loaded. Default:
  // the program's file name.
  std::string run_name;

  // HVRUN_CHECKPOINT_DIR, HVRUN_CHECKPOINT_EVERY, HVRUN_CHECKPOINT_KEEP, HVRUN_CHECKPOINT_NAME
  // (flags --checkpoint-dir, --checkpoint-every, --checkpoint-keep, --checkpoint-name of hvrun).
  static Result<CheckpointOptions> from_environment();
};

class Checkpointer {
 public:
  Checkpointer(Worker& worker, CheckpointOptions options);

  bool enabled() const { return !options_.directory.empty(); }
  const CheckpointOptions& options() const { return options_; }

  // Registers `bytes` bytes at `data` as part of the state, saved from and restored into that
  // memory. Every rank registers the same names, in the same order, with the same sizes.
  Status add(const std::string& name, void* data, size_t bytes);

  // Rank 0 writes a checkpoint of step `step` now (other ranks return at once). Returns the
  // path written on rank 0, "" elsewhere or when checkpoints are off.
  Result<std::string> save(int64_t step);
  // save(step) when options().every > 0 and step % every == 0; "" otherwise.
  Result<std::string> save_if_due(int64_t step);

  // Collective (every rank calls it): rank 0 finds the newest good checkpoint and broadcasts
  // its state into every rank's registered memory. The step it was saved at, or nullopt.
  Result<std::optional<int64_t>> restore();

 private:
  struct Entry {
    std::string name;
    void* data;
    size_t bytes;
  };
  Worker& worker_;
  CheckpointOptions options_;
  std::vector<Entry> entries_;
  int restores_ = 0;  // names each restore's broadcasts apart
};

}  // namespace hvrun

// WorkerSlot: the hvrun::Worker that this process's TensorFlow kernels submit to.
//
// hvrun.tensorflow's Python side creates the Worker (hvrun._core, shared with the NumPy and
// PyTorch packages: one worker per process) and attaches it here through the C function
// hvrun_tensorflow_attach_worker when init() succeeds; it detaches it before shutdown() ends
// the worker. Kernels hold the slot's shared lock only while they submit, so detaching waits
// for submissions in progress and never for a collective in flight (its handle completes, or is
// cancelled by shutdown, on its own).
#pragma once

#include <shared_mutex>

#include "hvrun/hvrun.h"

namespace hvrun::tensorflow_ops {

class WorkerSlot {
 public:
  static WorkerSlot& of_process();

  void attach(Worker* worker);

  // Runs fn(worker) under the shared lock; false (fn not run) when no worker is attached.
  template <typename Fn>
  bool with_worker(Fn&& fn) {
    std::shared_lock lock(mutex_);
    if (worker_ == nullptr) return false;
    fn(*worker_);
    return true;
  }

 private:
  std::shared_mutex mutex_;
  Worker* worker_ = nullptr;  // guarded by mutex_
};

}  // namespace hvrun::tensorflow_ops

extern "C" {
// `worker_address`: the address of the hvrun::Worker hvrun._core created (0 detaches). Returns
// the library's ABI version so that the caller can tell it loaded the library it expects.
__attribute__((visibility("default"))) int hvrun_tensorflow_attach_worker(unsigned long long worker_address);
}

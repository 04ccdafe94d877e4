#include "python/tf_ops/worker_slot.h"

#include <cstdint>
#include <mutex>

#include "hvrun/c_api.h"

namespace hvrun::tensorflow_ops {

WorkerSlot& WorkerSlot::of_process() {
  static WorkerSlot slot;
  return slot;
}

void WorkerSlot::attach(Worker* worker) {
  std::unique_lock lock(mutex_);
  worker_ = worker;
}

}  // namespace hvrun::tensorflow_ops

extern "C" int hvrun_tensorflow_attach_worker(unsigned long long worker_address) {
  hvrun::tensorflow_ops::WorkerSlot::of_process().attach(
      reinterpret_cast<hvrun::Worker*>(static_cast<uintptr_t>(worker_address)));
  return HVRUN_C_ABI_VERSION;
}

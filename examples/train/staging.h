// Where train's collectives run: on the host tensors themselves (--device cpu, the default) or
// on device copies (--device cuda), which go through hvrun's NCCL data plane. The model's math
// stays on the host either way (the example is about the data plane).
#pragma once

#include <memory>
#include <string>

#include "hvrun/hvrun.h"

namespace train {

class Staging {
 public:
  virtual ~Staging() = default;
  // The tensor a collective should use for `host`: `host` itself, or a device copy of it
  // (uploaded in stream order) that finish() copies back.
  virtual hvrun::TensorView stage(const std::string& key, const hvrun::TensorView& host) = 0;
  // After the collectives' handles completed: copies every staged result back into its host
  // tensor and waits for that. False (with a message on stderr) on a CUDA error.
  virtual bool finish() = 0;
  virtual std::string describe() const = 0;
};

std::unique_ptr<Staging> make_host_staging();
// On GPU `local_rank` (or the only visible one); nullptr and `error` when this build has no CUDA
// or the machine no usable GPU.
std::unique_ptr<Staging> make_cuda_staging(int local_rank, std::string& error);

}  // namespace train

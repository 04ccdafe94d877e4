// Per-GPU memory of a training job, as a breakdown: what `hvrun estimate-memory` computes.
//
// Formulas and their sources (docs/estimate-memory.md, docs/gpu-facts.md):
//   model states: ZeRO paper (Rajbhandari et al., arXiv:1910.02054): bytes per parameter for
//     weights, gradients and optimizer state; ZeRO stage 1/2/3 divides optimizer state /
//     +gradients / +weights by the data-parallel degree.
//   activations per transformer layer: Korthikanti et al. 2022 (arXiv:2205.05198):
//     16-bit 34·s·b·h + 5·a·s²·b, fp32 66·s·b·h + 9·a·s²·b; flash attention or selective
//     recomputation drops the s² term; full recomputation keeps 2·s·b·h (16-bit) per layer plus
//     one layer's activations while it is recomputed; tensor + sequence parallelism divides by t.
//   logits: b·s·vocab·bytes.
// Everything is pure arithmetic on the inputs: no probing, so tests check it by hand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::estimate {

enum class Precision { kFp32, kMixed };  // kMixed: 16-bit compute with fp32 master weights
enum class Optimizer { kSgd, kMomentum, kAdam };
enum class Attention { kMaterialised, kFlash };
enum class Recompute { kNone, kSelective, kFull };

struct ModelShape {
  std::string name = "custom";
  double params = 0;  // total parameters
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int vocab = 0;      // 0: no logits line
  int seq = 0;        // sequence length used for activations
};

struct TrainingSetup {
  ModelShape model;
  int batch_per_gpu = 1;        // micro-batch each data-parallel rank processes
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdam;
  Attention attention = Attention::kMaterialised;
  Recompute recompute = Recompute::kNone;
  int gpus = 1;                 // all GPUs of the job
  int tensor_parallel = 1;      // t: GPUs that split each layer (with sequence parallelism)
  int zero_stage = 0;           // 0..3 over the data-parallel degree gpus / t
  std::optional<double> activation_bytes_per_sample;  // replaces the transformer formula
  double cuda_context_bytes = 500e6;
  double nccl_buffer_bytes = 256.0 * 1024 * 1024;      // only when the job has more than one GPU
  double fusion_buffer_bytes = 128.0 * 1024 * 1024;    // hvrun's fusion buffer, data parallel only
  double allocator_slack = 0.15;                       // fraction of the tensors' bytes
};

struct MemoryLine {
  std::string component;  // "weights", "gradients", ...
  double bytes = 0;
  std::string how;        // the formula with its numbers, for the table
};

struct MemoryEstimate {
  std::vector<MemoryLine> lines;  // in table order, total not included
  double total_bytes = 0;
  int data_parallel = 1;
};

std::string_view to_string(Precision p);
std::string_view to_string(Optimizer o);
std::string_view to_string(Attention a);
std::string_view to_string(Recompute r);

// Bytes per parameter of weights, gradients and optimizer state before any ZeRO partitioning.
struct BytesPerParam {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
};
BytesPerParam bytes_per_param(Precision precision, Optimizer optimizer);

// Activation bytes of ONE transformer layer for batch b, before dividing by t (Korthikanti).
double layer_activation_bytes(const ModelShape& model, int batch, Precision precision,
                              Attention attention, Recompute recompute);

// Checks the setup (a message per bad input) and computes the breakdown.
Result<MemoryEstimate> estimate_memory(const TrainingSetup& setup);

// The largest batch per GPU whose total fits in `gpu_memory_bytes`; 0 when even batch 1 does not.
Result<int> largest_batch_that_fits(TrainingSetup setup, double gpu_memory_bytes);

}  // namespace hvrun::estimate

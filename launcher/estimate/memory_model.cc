#include "launcher/estimate/memory_model.h"

#include <cstdio>

#include "launcher/estimate/byte_size.h"

namespace hvrun::estimate {
namespace {

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// The per-layer formula as text, for the table's "how" column.
std::string layer_formula(Precision precision, Attention attention, Recompute recompute) {
  const bool fp32 = precision == Precision::kFp32;
  const bool s2_term = attention == Attention::kMaterialised && recompute == Recompute::kNone;
  std::string full = fp32 ? "66·s·b·h" : "34·s·b·h";
  if (s2_term) full += fp32 ? " + 9·a·s²·b" : " + 5·a·s²·b";
  if (recompute == Recompute::kFull)
    return std::string(fp32 ? "4·s·b·h" : "2·s·b·h") + " kept per layer + one layer of " + full;
  return full + " per layer";
}

}  // namespace

std::string_view to_string(Precision p) { return p == Precision::kFp32 ? "fp32" : "mixed"; }
std::string_view to_string(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kMomentum: return "momentum";
    case Optimizer::kAdam: return "adam";
  }
  return "?";
}
std::string_view to_string(Attention a) {
  return a == Attention::kFlash ? "flash" : "materialised";
}
std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

BytesPerParam bytes_per_param(Precision precision, Optimizer optimizer) {
  // Optimizer state in fp32 either way: momentum 4 B, Adam's momentum + variance 8 B.
  double state = optimizer == Optimizer::kSgd ? 0 : optimizer == Optimizer::kMomentum ? 4 : 8;
  if (precision == Precision::kFp32) return BytesPerParam{4, 4, state};
  // Mixed precision: 16-bit weights and gradients, plus an fp32 master copy in the optimizer.
  return BytesPerParam{2, 2, 4 + state};
}

double layer_activation_bytes(const ModelShape& m, int batch, Precision precision,
                              Attention attention, Recompute recompute) {
  const double s = m.seq, b = batch, h = m.hidden, a = m.heads;
  const bool fp32 = precision == Precision::kFp32;
  double linear = (fp32 ? 66.0 : 34.0) * s * b * h;
  double quadratic = (fp32 ? 9.0 : 5.0) * a * s * s * b;
  // Flash attention never stores the s x s scores; selective recomputation recomputes them.
  if (attention == Attention::kFlash || recompute != Recompute::kNone) quadratic = 0;
  if (recompute == Recompute::kFull) {
    // Only each layer's input stays (2 bytes per element, 4 in fp32); the backward pass then
    // rebuilds one layer at a time, so one layer's full activations come on top (in
    // estimate_memory, which knows the layer count).
    return (fp32 ? 4.0 : 2.0) * s * b * h;
  }
  return linear + quadratic;
}

Result<MemoryEstimate> estimate_memory(const TrainingSetup& in) {
  const ModelShape& m = in.model;
  auto bad = [](const std::string& message) {
    return Status(StatusCode::kInvalidArgument, message);
  };
  if (m.params <= 0) return bad("the parameter count is unknown: give --params or --model");
  if (in.gpus < 1) return bad("--gpus must be at least 1");
  if (in.tensor_parallel < 1 || in.gpus % in.tensor_parallel != 0)
    return bad("--tensor-parallel " + std::to_string(in.tensor_parallel) + " must divide --gpus " +
               std::to_string(in.gpus));
  if (in.zero_stage < 0 || in.zero_stage > 3) return bad("--zero must be 0, 1, 2 or 3");
  if (in.batch_per_gpu < 0) return bad("--batch must not be negative");
  if (in.allocator_slack < 0) return bad("--allocator-slack must not be negative");
  const bool formula = !in.activation_bytes_per_sample.has_value();
  if (formula && (m.layers <= 0 || m.hidden <= 0 || m.heads <= 0 || m.seq <= 0))
    return bad("activations need --layers, --hidden, --heads and --seq (or a --model preset), or "
               "--activation-per-sample SIZE measured for one sample");

  MemoryEstimate out;
  const double t = in.tensor_parallel;
  const int d = in.gpus / in.tensor_parallel;
  out.data_parallel = d;
  const double params_here = m.params / t;  // tensor parallelism splits every layer
  const BytesPerParam per = bytes_per_param(in.precision, in.optimizer);
  const std::string p_text = format_count(params_here) + " params";
  auto state_line = [&](const std::string& name, double bytes_each, bool partitioned,
                        const std::string& what) {
    double bytes = params_here * bytes_each / (partitioned ? d : 1);
    std::string how = p_text + " x " + fmt("%g B", bytes_each) + " (" + what + ")";
    if (t > 1) how = m.name + " / t=" + fmt("%g", t) + ": " + how;
    if (partitioned && d > 1) how += " / " + std::to_string(d) + " (ZeRO-" +
                                     std::to_string(in.zero_stage) + ")";
    out.lines.push_back({name, bytes, how});
  };
  const bool fp32 = in.precision == Precision::kFp32;
  state_line("weights", per.weights, in.zero_stage >= 3, fp32 ? "fp32" : "16-bit");
  state_line("gradients", per.gradients, in.zero_stage >= 2, fp32 ? "fp32" : "16-bit");
  std::string opt_what = std::string(to_string(in.optimizer));
  if (in.optimizer == Optimizer::kMomentum) opt_what += ": fp32 momentum";
  if (in.optimizer == Optimizer::kAdam) opt_what += ": fp32 momentum + variance";
  if (!fp32) opt_what += in.optimizer == Optimizer::kSgd ? ": fp32 master weights"
                                                         : " + fp32 master weights";
  state_line("optimizer state", per.optimizer, in.zero_stage >= 1, opt_what);

  const double b = in.batch_per_gpu;
  if (formula) {
    double per_layer = layer_activation_bytes(m, in.batch_per_gpu, in.precision, in.attention,
                                              in.recompute);
    double bytes = per_layer * m.layers;
    if (in.recompute == Recompute::kFull)
      bytes += layer_activation_bytes(m, in.batch_per_gpu, in.precision, in.attention,
                                      Recompute::kNone);
    bytes /= t;
    std::string how = std::to_string(m.layers) + " layers x (" +
                      layer_formula(in.precision, in.attention, in.recompute) + "), s=" +
                      std::to_string(m.seq) + " b=" + std::to_string(in.batch_per_gpu) +
                      " h=" + std::to_string(m.hidden) + " a=" + std::to_string(m.heads);
    if (t > 1) how += ", / t=" + fmt("%g", t);
    out.lines.push_back({"activations", bytes, how});
  } else {
    out.lines.push_back({"activations", *in.activation_bytes_per_sample * b / t,
                         "b=" + std::to_string(in.batch_per_gpu) + " x " +
                             format_bytes(*in.activation_bytes_per_sample) +
                             " per sample (given)" + (t > 1 ? ", / t" : "")});
  }
  if (m.vocab > 0 && m.seq > 0) {
    const double bytes_each = fp32 ? 4 : 2;
    out.lines.push_back({"logits", b * m.seq * m.vocab * bytes_each / t,
                         "b·s·vocab x " + fmt("%g B", bytes_each) + ", vocab=" +
                             std::to_string(m.vocab) + (t > 1 ? ", / t" : "")});
  }
  double tensors = 0;
  for (const MemoryLine& line : out.lines) tensors += line.bytes;

  out.lines.push_back({"CUDA context", in.cuda_context_bytes,
                       "allowance (--cuda-context): driver, kernels, cuBLAS/cuDNN handles"});
  const bool communicates = in.gpus > 1;
  out.lines.push_back({"NCCL buffers", communicates ? in.nccl_buffer_bytes : 0,
                       communicates ? "allowance (--nccl-buffers): channels x peers x NCCL_BUFFSIZE"
                                    : "one GPU: no communicator"});
  out.lines.push_back({"fusion buffer", d > 1 ? in.fusion_buffer_bytes : 0,
                       d > 1 ? "hvrun's fusion buffer (--fusion-threshold-mb)"
                             : "no data parallelism: no allreduce"});
  out.lines.push_back({"allocator slack", tensors * in.allocator_slack,
                       fmt("%g%% of the tensors above (fragmentation, caching allocator)",
                           in.allocator_slack * 100)});
  for (const MemoryLine& line : out.lines) out.total_bytes += line.bytes;
  return out;
}

Result<int> largest_batch_that_fits(TrainingSetup setup, double gpu_memory_bytes) {
  auto total_at = [&setup](int batch) -> Result<double> {
    setup.batch_per_gpu = batch;
    HVRUN_ASSIGN_OR_RETURN(MemoryEstimate e, estimate_memory(setup));
    return e.total_bytes;
  };
  HVRUN_ASSIGN_OR_RETURN(double at_one, total_at(1));
  if (at_one > gpu_memory_bytes) return 0;
  // The total grows with the batch (every batch-dependent term is linear in b): bisect.
  int lo = 1, hi = 2;
  constexpr int kLimit = 1 << 24;
  while (hi < kLimit) {
    HVRUN_ASSIGN_OR_RETURN(double total, total_at(hi));
    if (total > gpu_memory_bytes) break;
    lo = hi;
    hi *= 2;
  }
  if (hi >= kLimit) return lo;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    HVRUN_ASSIGN_OR_RETURN(double total, total_at(mid));
    if (total > gpu_memory_bytes) hi = mid;
    else lo = mid;
  }
  return lo;
}

}  // namespace hvrun::estimate

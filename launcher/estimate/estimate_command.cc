#include "launcher/estimate/estimate_command.h"

#include <charconv>
#include <cstdio>
#include <map>
#include <ostream>

#include "launcher/doctor/json_writer.h"
#include "launcher/estimate/byte_size.h"
#include "launcher/estimate/model_presets.h"

namespace hvrun::estimate {
namespace {

Status bad(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

Result<int> parse_int(const std::string& flag, const std::string& text, int min) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < min)
    return bad(flag + " '" + text + "': expected a whole number >= " + std::to_string(min));
  return value;
}

Result<double> parse_fraction(const std::string& flag, const std::string& text) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || value > 10)
    return bad(flag + " '" + text + "': expected a fraction such as 0.15");
  return value;
}

template <typename Enum>
Result<Enum> parse_choice(const std::string& flag, const std::string& text,
                          const std::map<std::string, Enum>& choices) {
  if (auto it = choices.find(text); it != choices.end()) return it->second;
  std::string accepted;
  for (const auto& [name, value] : choices) accepted += (accepted.empty() ? "" : ", ") + name;
  return bad(flag + " '" + text + "': accepted values are " + accepted);
}

// The shape flags the user gave, applied over a preset (or over nothing).
struct ShapeFlags {
  std::optional<std::string> model;
  std::optional<double> params;
  std::optional<int> layers, hidden, heads, vocab, seq;
};

Result<ModelShape> resolve_shape(const ShapeFlags& f) {
  ModelShape m;
  if (f.model) {
    auto preset = find_preset(*f.model);
    if (!preset) {
      std::string names;
      for (const ModelShape& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
      return bad("--model '" + *f.model + "' is not a preset (known: " + names + ")");
    }
    m = *preset;
  }
  const bool shape_changed = f.layers || f.hidden;
  if (f.layers) m.layers = *f.layers;
  if (f.hidden) m.hidden = *f.hidden;
  if (f.heads) m.heads = *f.heads;
  if (f.vocab) m.vocab = *f.vocab;
  if (f.seq) m.seq = *f.seq;
  if (f.params) m.params = *f.params;
  else if ((shape_changed || !f.model) && m.layers > 0 && m.hidden > 0)
    m.params = approximate_params(m.layers, m.hidden, m.vocab);
  if (f.model && (shape_changed || f.params)) m.name = *f.model + " (modified)";
  return m;
}

void print_table(const EstimateRequest& req, const MemoryEstimate& e, std::ostream& out) {
  const TrainingSetup& s = req.setup;
  const ModelShape& m = s.model;
  out << "hvrun estimate-memory: " << m.name << ", " << format_count(m.params) << " params, "
      << to_string(s.precision) << (s.precision == Precision::kMixed ? " precision" : "") << ", "
      << to_string(s.optimizer) << ", batch " << s.batch_per_gpu << " per GPU";
  if (m.seq > 0) out << ", sequence " << m.seq;
  out << "\n  " << s.gpus << " GPU" << (s.gpus == 1 ? "" : "s") << ": data parallel "
      << e.data_parallel << " x tensor parallel " << s.tensor_parallel << ", ZeRO-" << s.zero_stage
      << "; attention " << to_string(s.attention) << ", recomputation " << to_string(s.recompute)
      << "\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-16s %10s  %s\n", "component", "per GPU", "how");
  out << line;
  for (const MemoryLine& l : e.lines) {
    std::snprintf(line, sizeof line, "  %-16s %10s  %s\n", l.component.c_str(),
                  format_bytes(l.bytes).c_str(), l.how.c_str());
    out << line;
  }
  std::snprintf(line, sizeof line, "  %-16s %10s\n", "total", format_bytes(e.total_bytes).c_str());
  out << line;
}

void write_json(const EstimateRequest& req, const MemoryEstimate& e, std::optional<int> max_batch,
                std::ostream& out) {
  const TrainingSetup& s = req.setup;
  json::Writer w;
  w.begin_object()
      .value("model", s.model.name)
      .value("params", s.model.params)
      .value("layers", s.model.layers)
      .value("hidden", s.model.hidden)
      .value("heads", s.model.heads)
      .value("vocab", s.model.vocab)
      .value("seq", s.model.seq)
      .value("batch_per_gpu", s.batch_per_gpu)
      .value("precision", to_string(s.precision))
      .value("optimizer", to_string(s.optimizer))
      .value("attention", to_string(s.attention))
      .value("recompute", to_string(s.recompute))
      .value("gpus", s.gpus)
      .value("tensor_parallel", s.tensor_parallel)
      .value("data_parallel", e.data_parallel)
      .value("zero_stage", s.zero_stage);
  w.begin_array("components");
  for (const MemoryLine& l : e.lines)
    w.begin_object().value("name", l.component).value("bytes", l.bytes).value("how", l.how).end_object();
  w.end_array().value("total_bytes", e.total_bytes);
  if (req.gpu_memory_bytes) {
    w.value("gpu_memory_bytes", *req.gpu_memory_bytes)
        .value("fits", e.total_bytes <= *req.gpu_memory_bytes);
    if (max_batch) w.value("max_batch_per_gpu", *max_batch);
  }
  w.end_object();
  out << w.str() << "\n";
}

}  // namespace

std::string estimate_usage() {
  std::string presets;
  for (const ModelShape& p : model_presets()) presets += (presets.empty() ? "" : ", ") + p.name;
  return "usage: hvrun estimate-memory [--model NAME] [--params N] [--layers L] [--hidden H]\n"
         "         [--heads A] [--seq S] [--vocab V] [--batch B] [--precision fp32|mixed]\n"
         "         [--optimizer sgd|momentum|adam] [--attention materialised|flash]\n"
         "         [--recompute none|selective|full] [--gpus N] [--tensor-parallel T]\n"
         "         [--zero 0|1|2|3] [--activation-per-sample SIZE] [--gpu-memory SIZE]\n"
         "         [--cuda-context SIZE] [--nccl-buffers SIZE] [--fusion-threshold-mb MB]\n"
         "         [--allocator-slack F] [--json] [--list-models]\n"
         "Per-GPU training memory as a breakdown (formulas and sources: docs/estimate-memory.md).\n"
         "--batch is the micro-batch of each data-parallel rank; --gpu-memory (e.g. 24GB, 80GiB)\n"
         "adds the largest batch per GPU that fits. Presets: " + presets + "\n";
}

Result<EstimateRequest> parse_estimate_args(const std::vector<std::string>& args) {
  EstimateRequest req;
  ShapeFlags shape;
  TrainingSetup& s = req.setup;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_inline = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto take = [&]() -> Result<std::string> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return bad(flag + " needs a value");
      return args[++i];
    };
    if (flag == "--json") { req.json = true; continue; }
    if (flag == "--list-models") { req.list_models = true; continue; }
    if (flag == "--help" || flag == "-h") { req.help = true; continue; }
    static const char* const kValueFlags[] = {
        "--model", "--preset", "--params", "--layers", "--hidden", "--heads", "--vocab", "--seq",
        "--batch", "--gpus", "--tensor-parallel", "--zero", "--precision", "--optimizer",
        "--attention", "--recompute", "--activation-per-sample", "--gpu-memory", "--cuda-context",
        "--nccl-buffers", "--fusion-threshold-mb", "--allocator-slack"};
    bool known = false;
    for (const char* f : kValueFlags) known = known || flag == f;
    if (!known)
      return bad("estimate-memory: unknown option '" + args[i] + "' (see hvrun estimate-memory --help)");
    HVRUN_ASSIGN_OR_RETURN(std::string v, take());
    if (flag == "--model" || flag == "--preset") shape.model = v;
    else if (flag == "--params") {
      auto n = parse_count(v);
      if (!n.is_ok() || *n <= 0) return bad("--params '" + v + "': expected a count such as 335M or 7B");
      shape.params = *n;
    } else if (flag == "--layers") { HVRUN_ASSIGN_OR_RETURN(shape.layers, parse_int(flag, v, 1)); }
    else if (flag == "--hidden") { HVRUN_ASSIGN_OR_RETURN(shape.hidden, parse_int(flag, v, 1)); }
    else if (flag == "--heads") { HVRUN_ASSIGN_OR_RETURN(shape.heads, parse_int(flag, v, 1)); }
    else if (flag == "--vocab") { HVRUN_ASSIGN_OR_RETURN(shape.vocab, parse_int(flag, v, 0)); }
    else if (flag == "--seq") { HVRUN_ASSIGN_OR_RETURN(shape.seq, parse_int(flag, v, 1)); }
    else if (flag == "--batch") {
      HVRUN_ASSIGN_OR_RETURN(s.batch_per_gpu, parse_int(flag, v, 1));
      req.batch_given = true;
    } else if (flag == "--gpus") { HVRUN_ASSIGN_OR_RETURN(s.gpus, parse_int(flag, v, 1)); }
    else if (flag == "--tensor-parallel") {
      HVRUN_ASSIGN_OR_RETURN(s.tensor_parallel, parse_int(flag, v, 1));
    } else if (flag == "--zero") {
      HVRUN_ASSIGN_OR_RETURN(s.zero_stage, parse_int(flag, v, 0));
      if (s.zero_stage > 3) return bad("--zero '" + v + "': accepted values are 0, 1, 2, 3");
    } else if (flag == "--precision") {
      HVRUN_ASSIGN_OR_RETURN(s.precision, parse_choice<Precision>(flag, v, {
          {"fp32", Precision::kFp32}, {"mixed", Precision::kMixed}, {"fp16", Precision::kMixed},
          {"bf16", Precision::kMixed}, {"amp", Precision::kMixed}}));
    } else if (flag == "--optimizer") {
      HVRUN_ASSIGN_OR_RETURN(s.optimizer, parse_choice<Optimizer>(flag, v, {
          {"sgd", Optimizer::kSgd}, {"momentum", Optimizer::kMomentum},
          {"adam", Optimizer::kAdam}, {"adamw", Optimizer::kAdam}}));
    } else if (flag == "--attention") {
      HVRUN_ASSIGN_OR_RETURN(s.attention, parse_choice<Attention>(flag, v, {
          {"materialised", Attention::kMaterialised}, {"materialized", Attention::kMaterialised},
          {"flash", Attention::kFlash}}));
    } else if (flag == "--recompute") {
      HVRUN_ASSIGN_OR_RETURN(s.recompute, parse_choice<Recompute>(flag, v, {
          {"none", Recompute::kNone}, {"selective", Recompute::kSelective},
          {"full", Recompute::kFull}}));
    } else if (flag == "--activation-per-sample") {
      HVRUN_ASSIGN_OR_RETURN(double bytes, parse_bytes(v));
      s.activation_bytes_per_sample = bytes;
    } else if (flag == "--gpu-memory") {
      HVRUN_ASSIGN_OR_RETURN(double bytes, parse_bytes(v));
      if (bytes <= 0) return bad("--gpu-memory must be positive");
      req.gpu_memory_bytes = bytes;
    } else if (flag == "--cuda-context") { HVRUN_ASSIGN_OR_RETURN(s.cuda_context_bytes, parse_bytes(v)); }
    else if (flag == "--nccl-buffers") { HVRUN_ASSIGN_OR_RETURN(s.nccl_buffer_bytes, parse_bytes(v)); }
    else if (flag == "--fusion-threshold-mb") {
      HVRUN_ASSIGN_OR_RETURN(int mb, parse_int(flag, v, 0));
      s.fusion_buffer_bytes = mb * 1024.0 * 1024.0;
    } else if (flag == "--allocator-slack") {
      HVRUN_ASSIGN_OR_RETURN(s.allocator_slack, parse_fraction(flag, v));
    } else {
      return bad("estimate-memory: unknown option '" + args[i] + "' (see hvrun estimate-memory --help)");
    }
  }
  HVRUN_ASSIGN_OR_RETURN(s.model, resolve_shape(shape));
  return req;
}

int run_estimate_memory(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = parse_estimate_args(args);
  if (!parsed.is_ok()) {
    err << "hvrun: " << parsed.status().message() << "\n";
    return 2;
  }
  EstimateRequest req = std::move(parsed).value();
  if (req.help) {
    out << estimate_usage();
    return 0;
  }
  if (req.list_models) {
    for (const ModelShape& m : model_presets())
      out << m.name << ": " << format_count(m.params) << " params, " << m.layers << " layers, hidden "
          << m.hidden << ", " << m.heads << " heads, vocab " << m.vocab << ", sequence " << m.seq << "\n";
    return 0;
  }
  std::optional<int> max_batch;
  if (req.gpu_memory_bytes) {
    auto fit = largest_batch_that_fits(req.setup, *req.gpu_memory_bytes);
    if (!fit.is_ok()) {
      err << "hvrun: " << fit.status().message() << "\n";
      return 2;
    }
    max_batch = *fit;
    // Without --batch, show the breakdown at the answer (or at batch 1 when nothing fits).
    if (!req.batch_given) req.setup.batch_per_gpu = std::max(1, *max_batch);
  }
  auto estimate = estimate_memory(req.setup);
  if (!estimate.is_ok()) {
    err << "hvrun: " << estimate.status().message() << "\n";
    return 2;
  }
  if (req.json) {
    write_json(req, *estimate, max_batch, out);
    return 0;
  }
  print_table(req, *estimate, out);
  if (req.gpu_memory_bytes) {
    const double cap = *req.gpu_memory_bytes;
    const double total = estimate->total_bytes;
    out << "\n  fits in " << format_bytes(cap) << ": "
        << (total <= cap ? "yes (" + format_bytes(cap - total) + " to spare)"
                         : "no (" + format_bytes(total - cap) + " over)")
        << "\n  largest batch per GPU that fits in " << format_bytes(cap) << ": " << *max_batch;
    if (*max_batch == 0)
      out << " (even batch 1 does not fit: try --precision mixed, --recompute full, --zero 3 "
             "over more --gpus, or --tensor-parallel)";
    out << "\n";
  }
  return 0;
}

}  // namespace hvrun::estimate

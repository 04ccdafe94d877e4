// `hvrun estimate-memory [options]`: per-GPU training memory as a breakdown table (or --json),
// and with --gpu-memory the largest batch per GPU that fits. See docs/estimate-memory.md for the options.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/estimate/memory_model.h"

namespace hvrun::estimate {

struct EstimateRequest {
  TrainingSetup setup;
  bool batch_given = false;
  std::optional<double> gpu_memory_bytes;
  bool json = false;
  bool list_models = false;
  bool help = false;
};

// Parses the arguments after "estimate-memory". Errors are one line naming the bad option.
Result<EstimateRequest> parse_estimate_args(const std::vector<std::string>& args);

std::string estimate_usage();

// Runs the command; returns the process exit code (0 answered, 2 bad input).
int run_estimate_memory(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace hvrun::estimate

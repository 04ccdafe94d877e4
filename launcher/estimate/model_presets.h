// Model shapes `hvrun estimate-memory --model NAME` knows. Parameter counts are those of the
// public checkpoints (Hugging Face model cards); BERT-large's 335 M is the check in GPU-FACTS.md.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "launcher/estimate/memory_model.h"

namespace hvrun::estimate {

const std::vector<ModelShape>& model_presets();
std::optional<ModelShape> find_preset(std::string_view name);

// 12·L·h² + V·h: a transformer's parameters when only its shape is given (the attention and
// MLP matrices of every layer plus the token embedding; biases and norms are below 1 %).
double approximate_params(int layers, int hidden, int vocab);

}  // namespace hvrun::estimate

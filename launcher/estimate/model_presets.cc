#include "launcher/estimate/model_presets.h"

namespace hvrun::estimate {

const std::vector<ModelShape>& model_presets() {
  // name, params, layers, hidden, heads, vocab, default sequence length
  static const std::vector<ModelShape> presets = {
      {"bert-base", 109482240, 12, 768, 12, 30522, 512},
      {"bert-large", 335141888, 24, 1024, 16, 30522, 512},
      {"gpt2", 124439808, 12, 768, 12, 50257, 1024},
      {"gpt2-medium", 354823168, 24, 1024, 16, 50257, 1024},
      {"gpt2-large", 774030080, 36, 1280, 20, 50257, 1024},
      {"gpt2-xl", 1557611200, 48, 1600, 25, 50257, 1024},
      // LLaMA's MLP is SwiGLU (8/3·h wide, three matrices) and 70B uses grouped-query
      // attention: Korthikanti's per-layer constant is an approximation for them.
      {"llama-7b", 6738415616, 32, 4096, 32, 32000, 2048},
      {"llama-13b", 13015864320, 40, 5120, 40, 32000, 2048},
      {"llama-70b", 68976648192, 80, 8192, 64, 32000, 2048},
  };
  return presets;
}

std::optional<ModelShape> find_preset(std::string_view name) {
  for (const ModelShape& m : model_presets())
    if (m.name == name) return m;
  return std::nullopt;
}

double approximate_params(int layers, int hidden, int vocab) {
  const double h = hidden;
  return 12.0 * layers * h * h + static_cast<double>(vocab) * h;
}

}  // namespace hvrun::estimate

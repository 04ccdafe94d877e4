// A two-layer perceptron for binary classification (8 -> 16 tanh -> 1 sigmoid), with the
// synthetic data it learns: labels come from a fixed random "teacher" network, so the loss can
// fall well below log(2). Plain loops: the example is about the data-parallel plumbing.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace train {

inline constexpr int kInputs = 8;
inline constexpr int kHidden = 16;

struct Parameters {
  std::vector<float> w1 = std::vector<float>(kHidden * kInputs);
  std::vector<float> b1 = std::vector<float>(kHidden);
  std::vector<float> w2 = std::vector<float>(kHidden);
  std::vector<float> b2 = std::vector<float>(1);

  std::vector<std::vector<float>*> tensors() { return {&w1, &b1, &w2, &b2}; }
  std::vector<const std::vector<float>*> tensors() const { return {&w1, &b1, &w2, &b2}; }
  static std::vector<const char*> names() { return {"w1", "b1", "w2", "b2"}; }
};

struct Batch {
  std::vector<float> x;  // rows x kInputs
  std::vector<float> y;  // rows, 0 or 1
  int rows = 0;
};

Parameters init_parameters(uint64_t seed);
// `count` batches of `rows` examples, drawn with `seed` (one seed per rank: its shard).
std::vector<Batch> make_shard(uint64_t seed, int count, int rows);
// Mean binary cross-entropy of the batch; fills `grad` (same layout as params).
float loss_and_gradient(const Parameters& params, const Batch& batch, Parameters& grad);
void sgd_step(Parameters& params, const Parameters& grad, float learning_rate);
// FNV-1a of the parameters' bytes, as a signed 64-bit number (allreduce-able).
int64_t checksum(const Parameters& params);

}  // namespace train

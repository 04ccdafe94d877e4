#include "mlp.h"

#include <cmath>
#include <cstring>

namespace train {
namespace {

void fill_normal(std::vector<float>& v, std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  for (float& x : v) x = dist(rng);
}

float forward(const Parameters& p, const float* x, std::vector<float>& hidden) {
  float out = p.b2[0];
  for (int h = 0; h < kHidden; ++h) {
    float a = p.b1[h];
    for (int i = 0; i < kInputs; ++i) a += p.w1[h * kInputs + i] * x[i];
    hidden[h] = std::tanh(a);
    out += p.w2[h] * hidden[h];
  }
  return out;
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace

Parameters init_parameters(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Parameters p;
  fill_normal(p.w1, rng, 0.5f);
  fill_normal(p.w2, rng, 0.5f);
  return p;
}

std::vector<Batch> make_shard(uint64_t seed, int count, int rows) {
  Parameters teacher = init_parameters(42);  // the same teacher on every rank
  for (float& w : teacher.w2) w *= 4.0f;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> hidden(kHidden);
  std::vector<Batch> batches(static_cast<size_t>(count));
  for (Batch& b : batches) {
    b.rows = rows;
    b.x.resize(static_cast<size_t>(rows) * kInputs);
    b.y.resize(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      float* x = &b.x[static_cast<size_t>(r) * kInputs];
      for (int i = 0; i < kInputs; ++i) x[i] = dist(rng);
      b.y[r] = forward(teacher, x, hidden) > 0 ? 1.0f : 0.0f;
    }
  }
  return batches;
}

float loss_and_gradient(const Parameters& p, const Batch& batch, Parameters& g) {
  for (auto* t : g.tensors()) std::fill(t->begin(), t->end(), 0.0f);
  std::vector<float> hidden(kHidden);
  float loss = 0;
  float inv = 1.0f / static_cast<float>(batch.rows);
  for (int r = 0; r < batch.rows; ++r) {
    const float* x = &batch.x[static_cast<size_t>(r) * kInputs];
    float prob = sigmoid(forward(p, x, hidden));
    float y = batch.y[r];
    loss -= y * std::log(prob + 1e-7f) + (1 - y) * std::log(1 - prob + 1e-7f);
    float dz = (prob - y) * inv;  // d loss / d logit, mean over the batch
    g.b2[0] += dz;
    for (int h = 0; h < kHidden; ++h) {
      g.w2[h] += dz * hidden[h];
      float da = dz * p.w2[h] * (1 - hidden[h] * hidden[h]);
      g.b1[h] += da;
      for (int i = 0; i < kInputs; ++i) g.w1[h * kInputs + i] += da * x[i];
    }
  }
  return loss * inv;
}

void sgd_step(Parameters& p, const Parameters& g, float learning_rate) {
  auto params = p.tensors();
  auto grads = g.tensors();
  for (size_t t = 0; t < params.size(); ++t)
    for (size_t i = 0; i < params[t]->size(); ++i) (*params[t])[i] -= learning_rate * (*grads[t])[i];
}

int64_t checksum(const Parameters& params) {
  uint64_t h = 1469598103934665603ull;
  for (const auto* t : params.tensors()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t->data());
    for (size_t i = 0; i < t->size() * sizeof(float); ++i) {
      h ^= bytes[i];
      h *= 1099511628211ull;
    }
  }
  int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

}  // namespace train

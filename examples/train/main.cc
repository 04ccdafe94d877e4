// train: data-parallel SGD of a small MLP through hvrun (the README's main job).
//
//   hvrun -np 2 -H localhost:2 build/bin/train [--epochs N] [--batches N] [--uneven] [--lr X]
//
// Every rank trains on its own shard (seeded by rank); gradients of the four parameter tensors
// are averaged with asynchronous allreduces each step (so they are fused). Rank 0 prints the
// loss of every epoch. With --uneven rank r has r extra batches per epoch and each epoch ends
// with join(); the last rank to join (which applied every update) then broadcasts the weights.
// At the end every rank checks that all ranks hold bitwise-identical weights (allreduce Min and
// Max of a checksum) and exits non-zero if not.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hvrun/hvrun.h"
#include "mlp.h"

namespace {

struct Flags {
  int epochs = 10;
  int batches = 20;
  int batch_rows = 32;
  float lr = 0.5f;
  bool uneven = false;
};

bool parse(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--epochs") f.epochs = std::atoi(next("--epochs"));
    else if (a == "--batches") f.batches = std::atoi(next("--batches"));
    else if (a == "--lr") f.lr = static_cast<float>(std::atof(next("--lr")));
    else if (a == "--uneven") f.uneven = true;
    else {
      std::fprintf(stderr, "usage: train [--epochs N] [--batches N] [--lr X] [--uneven]\n");
      return false;
    }
  }
  return f.epochs > 0 && f.batches > 0;
}

bool check(const hvrun::Status& s, const char* what, int rank) {
  if (s.is_ok()) return true;
  std::fprintf(stderr, "train rank %d: %s failed: %s\n", rank, what, s.to_string().c_str());
  return false;
}

hvrun::TensorView view(std::vector<float>& v) {
  return {v.data(), hvrun::DataType::kFloat32, {static_cast<int64_t>(v.size())}};
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!parse(argc, argv, flags)) return 2;
  auto init = hvrun::Worker::init();
  if (!init.is_ok()) {
    std::fprintf(stderr, "train: hvrun init failed: %s\n", init.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **init;
  const int rank = w.rank();

  train::Parameters params = train::init_parameters(rank == 0 ? 7 : 1000 + rank);
  // Start from rank 0's weights everywhere.
  auto names = train::Parameters::names();
  auto tensors = params.tensors();
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!check(w.broadcast(std::string("init.") + names[t], view(*tensors[t]), 0), "broadcast", rank))
      return 1;

  int my_batches = flags.batches + (flags.uneven ? rank : 0);
  std::vector<train::Batch> shard = train::make_shard(100 + static_cast<uint64_t>(rank), my_batches,
                                                      flags.batch_rows);
  train::Parameters grad;
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    double loss_sum = 0;
    for (const train::Batch& batch : shard) {
      loss_sum += train::loss_and_gradient(params, batch, grad);
      std::vector<hvrun::Handle> handles;
      auto grads = grad.tensors();
      for (size_t t = 0; t < grads.size(); ++t)
        handles.push_back(w.allreduce_async(std::string("grad.") + names[t], view(*grads[t]),
                                            {.op = hvrun::ReduceOp::kAverage}));
      for (auto& h : handles)
        if (!check(w.wait(h), "gradient allreduce", rank)) return 1;
      train::sgd_step(params, grad, flags.lr);
    }
    if (flags.uneven) {
      auto last = w.join();
      if (!check(last.status(), "join", rank)) return 1;
      for (size_t t = 0; t < tensors.size(); ++t)
        if (!check(w.broadcast(std::string("sync.") + names[t], view(*tensors[t]), *last),
                   "broadcast after join", rank))
          return 1;
    }
    std::vector<double> loss = {loss_sum / static_cast<double>(shard.size())};
    if (!check(w.allreduce("epoch.loss", {loss.data(), hvrun::DataType::kFloat64, {1}},
                           {.op = hvrun::ReduceOp::kAverage}),
               "loss allreduce", rank))
      return 1;
    if (rank == 0) std::printf("epoch %d loss %.6f\n", epoch + 1, loss[0]);
    std::fflush(stdout);
  }

  int64_t sum = train::checksum(params);
  int64_t lo = sum, hi = sum;
  if (!check(w.allreduce("checksum.min", {&lo, hvrun::DataType::kInt64, {1}}, {.op = hvrun::ReduceOp::kMin}), "checksum", rank) ||
      !check(w.allreduce("checksum.max", {&hi, hvrun::DataType::kInt64, {1}}, {.op = hvrun::ReduceOp::kMax}), "checksum", rank))
    return 1;
  bool same = lo == sum && hi == sum;
  std::printf("rank %d: weights %s on all %d ranks (checksum %016llx)\n", rank,
              same ? "identical" : "DIFFER", w.size(), static_cast<unsigned long long>(sum));
  (void)w.shutdown();
  return same ? 0 : 1;
}

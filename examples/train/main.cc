// train: data-parallel SGD of a small MLP through hvrun (the README's main job).
//
//   hvrun -np 2 -H localhost:2 build/bin/train [--epochs N] [--batches N] [--uneven] [--lr X]
//                                              [--device cpu|cuda] [--fail-at-step N]
//
// Every rank trains on its own shard (seeded by rank); gradients of the four parameter tensors
// are averaged with asynchronous allreduces each step (so they are fused). Rank 0 prints the
// loss of every epoch. With --uneven rank r has r extra batches per epoch and each epoch ends
// with join(); the last rank to join (which applied every update) then broadcasts the weights.
// At the end every rank checks that all ranks hold bitwise-identical weights (allreduce Min and
// Max of a checksum) and exits non-zero if not. With --device cuda every collective runs on device
// copies of the tensors (GPU local_rank, NCCL); the model's math stays on the host.
// With hvrun --checkpoint-dir DIR --checkpoint-every K the weights are saved every K steps and a
// restarted job (hvrun --max-restarts) resumes from the newest checkpoint; --fail-at-step N
// kills rank --fail-rank (default 1) after step N on the first attempt only, to try that out.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "hvrun/checkpoint.h"
#include "hvrun/hvrun.h"
#include "mlp.h"
#include "staging.h"

namespace {

struct Flags {
  int epochs = 10;
  int batches = 20;
  int batch_rows = 32;
  float lr = 0.5f;
  bool uneven = false;
  std::string device = "cpu";
  int64_t fail_at_step = -1;
  int fail_rank = 1;
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
    else if (a == "--device") f.device = next("--device");
    else if (a == "--fail-at-step") f.fail_at_step = std::atoll(next("--fail-at-step"));
    else if (a == "--fail-rank") f.fail_rank = std::atoi(next("--fail-rank"));
    else {
      std::fprintf(stderr, "usage: train [--epochs N] [--batches N] [--lr X] [--uneven] "
                           "[--device cpu|cuda] [--fail-at-step N [--fail-rank R]]\n");
      return false;
    }
  }
  if (f.device != "cpu" && f.device != "cuda") {
    std::fprintf(stderr, "train: --device takes cpu or cuda, not '%s'\n", f.device.c_str());
    return false;
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
  std::unique_ptr<train::Staging> staging = train::make_host_staging();
  if (flags.device == "cuda") {
    std::string error;
    staging = train::make_cuda_staging(w.local_rank(), error);
    if (!staging) {
      std::fprintf(stderr, "train rank %d: --device cuda: %s\n", rank, error.c_str());
      return 1;
    }
  }
  if (rank == 0) std::printf("collectives on %s\n", staging->describe().c_str());
  // Every collective goes through the staging: host tensors, or device copies of them.
  train::Staging& st = *staging;
  auto on_device = [&](const std::string& key, hvrun::TensorView host) { return st.stage(key, host); };

  train::Parameters params = train::init_parameters(rank == 0 ? 7 : 1000 + rank);
  // Start from rank 0's weights everywhere.
  auto names = train::Parameters::names();
  auto tensors = params.tensors();
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!check(w.broadcast(std::string("init.") + names[t], on_device(names[t], view(*tensors[t])), 0),
               "broadcast", rank) || !st.finish())
      return 1;

  // Checkpoints (hvrun --checkpoint-dir/--checkpoint-every): resume where the newest one ended.
  auto ckpt_options = hvrun::CheckpointOptions::from_environment();
  if (!check(ckpt_options.status(), "checkpoint settings", rank)) return 1;
  hvrun::Checkpointer ckpt(w, *ckpt_options);
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!check(ckpt.add(names[t], tensors[t]->data(), tensors[t]->size() * sizeof(float)),
               "checkpoint registration", rank))
      return 1;
  int64_t done = 0;  // steps completed (restored from a checkpoint after a restart)
  if (ckpt.enabled()) {
    if (flags.uneven) {
      std::fprintf(stderr, "train: checkpoints need equal shards; drop --uneven\n");
      return 2;
    }
    auto restored = ckpt.restore();
    if (!check(restored.status(), "checkpoint restore", rank)) return 1;
    if (*restored) {
      done = **restored;
      if (rank == 0) std::printf("resumed from the checkpoint of step %lld\n", static_cast<long long>(done));
    }
  }
  const int64_t first_step = done;
  const char* restart_env = std::getenv("HVRUN_RESTART_COUNT");
  const bool first_attempt = restart_env == nullptr || std::atoi(restart_env) == 0;

  int my_batches = flags.batches + (flags.uneven ? rank : 0);
  std::vector<train::Batch> shard = train::make_shard(100 + static_cast<uint64_t>(rank), my_batches,
                                                      flags.batch_rows);
  train::Parameters grad;
  const int64_t per_epoch = static_cast<int64_t>(shard.size());
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    if ((epoch + 1) * per_epoch <= first_step) continue;  // done before the restart
    double loss_sum = 0;
    int64_t counted = 0;
    for (int64_t b = 0; b < per_epoch; ++b) {
      if (epoch * per_epoch + b < first_step) continue;
      const train::Batch& batch = shard[static_cast<size_t>(b)];
      w.mark_phase("compute");  // which phase grew when a rank holds the others back
      loss_sum += train::loss_and_gradient(params, batch, grad);
      ++counted;
      w.mark_phase("allreduce");
      std::vector<hvrun::Handle> handles;
      auto grads = grad.tensors();
      for (size_t t = 0; t < grads.size(); ++t)
        handles.push_back(w.allreduce_async(std::string("grad.") + names[t],
                                            on_device(std::string("grad.") + names[t], view(*grads[t])),
                                            {.op = hvrun::ReduceOp::kAverage}));
      for (auto& h : handles)
        if (!check(w.wait(h), "gradient allreduce", rank)) return 1;
      if (!st.finish()) return 1;
      w.mark_phase("update");
      train::sgd_step(params, grad, flags.lr);
      ++done;
      w.mark_step();  // step rate and straggler attribution in /metrics and hvrun's summary
      if (first_attempt && done == flags.fail_at_step && rank == flags.fail_rank) {
        std::fprintf(stderr, "train rank %d: killing myself after step %lld (--fail-at-step)\n",
                     rank, static_cast<long long>(done));
        std::fflush(stderr);
        std::raise(SIGKILL);
      }
      auto saved = ckpt.save_if_due(done);
      if (!check(saved.status(), "checkpoint save", rank)) return 1;
    }
    if (flags.uneven) {
      auto last = w.join();
      if (!check(last.status(), "join", rank)) return 1;
      for (size_t t = 0; t < tensors.size(); ++t)
        if (!check(w.broadcast(std::string("sync.") + names[t], on_device(names[t], view(*tensors[t])), *last),
                   "broadcast after join", rank) || !st.finish())
          return 1;
    }
    std::vector<double> loss = {loss_sum / static_cast<double>(std::max<int64_t>(counted, 1))};
    if (!check(w.allreduce("epoch.loss", on_device("loss", {loss.data(), hvrun::DataType::kFloat64, {1}}),
                           {.op = hvrun::ReduceOp::kAverage}),
               "loss allreduce", rank) || !st.finish())
      return 1;
    if (rank == 0) std::printf("epoch %d loss %.6f\n", epoch + 1, loss[0]);
    std::fflush(stdout);
  }

  int64_t sum = train::checksum(params);
  int64_t lo = sum, hi = sum;
  if (!check(w.allreduce("checksum.min", on_device("lo", {&lo, hvrun::DataType::kInt64, {1}}), {.op = hvrun::ReduceOp::kMin}), "checksum", rank) ||
      !check(w.allreduce("checksum.max", on_device("hi", {&hi, hvrun::DataType::kInt64, {1}}), {.op = hvrun::ReduceOp::kMax}), "checksum", rank) ||
      !st.finish())
    return 1;
  bool same = lo == sum && hi == sum;
  std::printf("rank %d: weights %s on all %d ranks (checksum %016llx)\n", rank,
              same ? "identical" : "DIFFER", w.size(), static_cast<unsigned long long>(sum));
  staging.reset();
  (void)w.shutdown();
  return same ? 0 : 1;
}

// An elastic trainer on the C++ API (hvrun/elastic.h) for elastic_api_test.cc: every step adds
// the job's size to `total` (an allreduce of 1.0 per rank), committing every 2 steps; the process
// started as rank ELASTIC_KILL_RANK SIGKILLs itself at the start of step ELASTIC_KILL_AT. Rank 0
// prints "TOTAL <total> SIZE <size> RESETS <resets>" at the end, which the test compares with
// the arithmetic of the membership schedule.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hvrun/elastic.h"

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}
}  // namespace

int main() {
  const int launch_rank = env_int("HVRUN_RANK", -1);
  const int kill_rank = env_int("ELASTIC_KILL_RANK", -1);
  const int kill_at = env_int("ELASTIC_KILL_AT", -1);
  const int steps = env_int("ELASTIC_STEPS", 10);
  double total = 0;
  int64_t step = 0;
  int resets = 0;
  int size = 0;
  int rank = -1;
  hvrun::elastic::State state;
  if (!state.add("total", &total, sizeof total).is_ok() || !state.add("step", &step, sizeof step).is_ok())
    return 2;
  state.on_reset([&](hvrun::Worker&) { ++resets; });
  hvrun::Status status = hvrun::elastic::run(state, [&](hvrun::Worker& w, hvrun::elastic::State& st) {
    size = w.size();
    rank = w.rank();
    while (step < steps) {
      if (launch_rank == kill_rank && step == kill_at) ::raise(SIGKILL);
      double one = 1.0;
      HVRUN_RETURN_IF_ERROR(w.allreduce("one", hvrun::TensorView{&one, hvrun::DataType::kFloat64, {1}, {}, nullptr}));
      total += one;
      ++step;
      if (step % 2 == 0) HVRUN_RETURN_IF_ERROR(st.commit(w));
    }
    return hvrun::Status::ok();
  });
  if (!status.is_ok()) {
    std::fprintf(stderr, "elastic run failed: %s\n", status.to_string().c_str());
    return 1;
  }
  if (rank == 0) std::printf("TOTAL %.0f SIZE %d RESETS %d\n", total, size, resets);
  return 0;
}

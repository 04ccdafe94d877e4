/* The C API's elastic loop (hvrun_elastic_run), as elastic_cpp_job.cc: every step adds the job's
 * size to `total`, committing every 2 steps; the process started as rank ELASTIC_KILL_RANK
 * SIGKILLs itself at the start of step ELASTIC_KILL_AT; rank 0 prints
 * "TOTAL <total> SIZE <size> RESETS <resets>". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hvrun/c_api.h"

struct job {
  double total;
  int64_t step;
  int steps, launch_rank, kill_rank, kill_at, resets, size, rank;
};

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v ? atoi(v) : fallback;
}

static hvrun_status_t train(hvrun_worker_t* w, hvrun_elastic_state_t* state, void* user) {
  struct job* j = (struct job*)user;
  j->size = hvrun_size(w);
  j->rank = hvrun_rank(w);
  while (j->step < j->steps) {
    double one = 1.0;
    int64_t shape[1] = {1};
    hvrun_handle_t* handle = NULL;
    hvrun_status_t s;
    if (j->launch_rank == j->kill_rank && j->step == j->kill_at) raise(SIGKILL);
    s = hvrun_allreduce_submit(w, "one", &one, &one, HVRUN_FLOAT64, 1, shape, HVRUN_SUM, NULL,
                               &handle);
    if (s != HVRUN_OK) return s;
    s = hvrun_handle_wait(handle, -1);
    hvrun_handle_free(handle);
    if (s != HVRUN_OK) return s;
    j->total += one;
    j->step += 1;
    if (j->step % 2 == 0 && (s = hvrun_elastic_commit(state, w)) != HVRUN_OK) return s;
  }
  return HVRUN_OK;
}

static void on_reset(hvrun_worker_t* w, void* user) {
  (void)w;
  ((struct job*)user)->resets += 1;
}

int main(void) {
  struct job j = {0, 0, 0, 0, 0, 0, 0, 0, -1};
  hvrun_elastic_state_t* state = hvrun_elastic_state_new();
  hvrun_status_t s;
  j.steps = env_int("ELASTIC_STEPS", 10);
  j.launch_rank = env_int("HVRUN_RANK", -1);
  j.kill_rank = env_int("ELASTIC_KILL_RANK", -1);
  j.kill_at = env_int("ELASTIC_KILL_AT", -1);
  if (hvrun_elastic_state_add(state, "total", &j.total, sizeof j.total) != HVRUN_OK ||
      hvrun_elastic_state_add(state, "step", &j.step, sizeof j.step) != HVRUN_OK)
    return 2;
  s = hvrun_elastic_run(HVRUN_C_ABI_VERSION, state, train, on_reset, &j);
  hvrun_elastic_state_free(state);
  if (s != HVRUN_OK) {
    fprintf(stderr, "elastic run failed: %s: %s\n", hvrun_status_name(s), hvrun_last_error());
    return 1;
  }
  if (j.rank == 0) printf("TOTAL %.0f SIZE %d RESETS %d\n", j.total, j.size, j.resets);
  return 0;
}

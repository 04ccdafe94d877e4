/* The C API's telemetry calls in a real job: rank 0 starts the timeline, every rank runs a few
 * allreduces and marks steps (its worker, and every worker of the process with NULL), rank 0
 * stops the timeline.   hvrun -np N timeline_c_worker FILE */
#include <stdio.h>
#include <string.h>

#include "hvrun/c_api.h"

static int check(hvrun_status_t s, const char* what) {
  if (s == HVRUN_OK) return 1;
  fprintf(stderr, "%s failed: %s\n", what, hvrun_last_error());
  return 0;
}

static int barrier(hvrun_worker_t* w) {
  hvrun_handle_t* h = NULL;
  if (!check(hvrun_barrier_submit(w, NULL, &h), "barrier")) return 0;
  int ok = check(hvrun_handle_wait(h, -1), "barrier wait");
  hvrun_handle_free(h);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  hvrun_worker_t* w = NULL;
  if (!check(hvrun_init(HVRUN_C_ABI_VERSION, &w), "init")) return 1;
  const int rank = hvrun_rank(w);
  if (rank == 0 && !check(hvrun_start_timeline(w, argv[1]), "start_timeline")) return 1;
  if (hvrun_start_timeline(w, NULL) != HVRUN_ERR_INVALID_ARGUMENT) return 1;
  if (!barrier(w)) return 1;
  float values[64];
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 64; ++i) values[i] = 1.0f;
    int64_t shape[1] = {64};
    hvrun_handle_t* h = NULL;
    if (!check(hvrun_allreduce_submit(w, "c.grad", values, values, HVRUN_FLOAT32, 1, shape,
                                      HVRUN_SUM, NULL, &h),
               "allreduce"))
      return 1;
    if (!check(hvrun_handle_wait(h, -1), "allreduce wait")) return 1;
    hvrun_handle_free(h);
    if (step % 2 == 0) hvrun_mark_step(w);
    else hvrun_mark_step(NULL);
  }
  if (!barrier(w)) return 1;
  if (rank == 0 && !check(hvrun_stop_timeline(w), "stop_timeline")) return 1;
  printf("rank %d done\n", rank);
  return check(hvrun_finalize(w), "finalize") ? 0 : 1;
}

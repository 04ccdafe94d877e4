/* The straggler test's trainer through the C API, with asynchronous allreduces and waits (the
 * cached rounds agree on them among the ranks once negotiated): each step marks "data" (2 ms of
 * sleep; SLOW_MS more on rank SLOW_RANK), "forward" (1 ms), "backward" (two allreduces, then
 * their waits), then ends the step; every other step through the process-wide calls (NULL).
 *   straggler_c_worker SLOW_RANK SLOW_MS STEPS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hvrun/c_api.h"

static int check(hvrun_status_t s, const char* what) {
  if (s == HVRUN_OK) return 1;
  fprintf(stderr, "%s failed: %s\n", what, hvrun_last_error());
  return 0;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const int slow_rank = atoi(argv[1]);
  const int slow_ms = atoi(argv[2]);
  const int steps = atoi(argv[3]);
  hvrun_worker_t* w = NULL;
  if (!check(hvrun_init(HVRUN_C_ABI_VERSION, &w), "init")) return 1;
  const int rank = hvrun_rank(w);
  static float a[4096], b[16];
  for (int step = 0; step < steps; ++step) {
    hvrun_worker_t* which = step % 2 == 0 ? w : NULL;
    hvrun_mark_phase(which, "data");
    sleep_ms(2 + (rank == slow_rank ? slow_ms : 0));
    hvrun_mark_phase(which, "forward");
    sleep_ms(1);
    hvrun_mark_phase(which, "backward");
    int64_t shape_a[1] = {4096}, shape_b[1] = {16};
    hvrun_handle_t* ha = NULL;
    hvrun_handle_t* hb = NULL;
    if (!check(hvrun_allreduce_submit(w, "c.grad.a", a, a, HVRUN_FLOAT32, 1, shape_a, HVRUN_SUM,
                                      NULL, &ha),
               "allreduce a") ||
        !check(hvrun_allreduce_submit(w, "c.grad.b", b, b, HVRUN_FLOAT32, 1, shape_b, HVRUN_SUM,
                                      NULL, &hb),
               "allreduce b"))
      return 1;
    if (!check(hvrun_handle_wait(ha, -1), "wait a") || !check(hvrun_handle_wait(hb, -1), "wait b"))
      return 1;
    hvrun_handle_free(ha);
    hvrun_handle_free(hb);
    hvrun_mark_phase(which, NULL);
    hvrun_mark_step(which);
  }
  printf("rank %d done\n", rank);
  return check(hvrun_finalize(w), "finalize") ? 0 : 1;
}

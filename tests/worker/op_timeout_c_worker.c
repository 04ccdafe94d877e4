/* A per-op timeout bounds an op that cannot complete. Rank 0 submits allreduce "c.never" with
 * a timeout of its own (argv[1] ms); no other rank ever submits it (they wait in a barrier rank
 * 0 never enters). The job's op timeout (HVRUN_OP_TIMEOUT, set long by the test) would let
 * every wait run for a minute; the per-op timeout must end the op, and the job, after argv[1]
 * ms, with a reason that names the op and its timeout, on every rank.
 * Prints "rank R: per-op timeout ok after N ms" and exits 0 when it went so. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hvrun/c_api.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  const int64_t timeout_ms = argc > 1 ? atoll(argv[1]) : 1500;
  hvrun_worker_t* w = NULL;
  if (hvrun_init(HVRUN_C_ABI_VERSION, &w) != HVRUN_OK) {
    fprintf(stderr, "init: %s\n", hvrun_last_error());
    return 1;
  }
  const int rank = hvrun_rank(w);
  float x[4] = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  hvrun_handle_t* h = NULL;
  hvrun_status_t s;
  const double start = now_ms();
  if (rank == 0) {
    hvrun_op_options_t options = HVRUN_OP_OPTIONS_INITIALIZER;
    options.timeout_ms = timeout_ms;
    s = hvrun_allreduce_submit(w, "c.never", x, x, HVRUN_FLOAT32, 1, shape, HVRUN_SUM, &options,
                               &h);
  } else {
    s = hvrun_barrier_submit(w, NULL, &h);
  }
  if (s != HVRUN_OK) {
    fprintf(stderr, "rank %d: submit: %s\n", rank, hvrun_last_error());
    return 1;
  }
  s = hvrun_handle_wait(h, -1); /* -1: up to the job's op timeout */
  const double waited = now_ms() - start;
  char timeout_text[64];
  snprintf(timeout_text, sizeof timeout_text, "timeout of %lld ms", (long long)timeout_ms);
  const char* message = hvrun_last_error();
  int ok = s == HVRUN_ERR_ABORTED && strstr(message, "'c.never'") != NULL &&
           strstr(message, timeout_text) != NULL;
  if (rank == 0) ok = ok && waited >= (double)timeout_ms;
  printf("rank %d: %s after %.0f ms: %s\n", rank, hvrun_status_name(s), waited, message);
  hvrun_handle_free(h);
  hvrun_finalize(w);
  if (!ok) {
    fprintf(stderr, "rank %d: the op was not ended by its per-op timeout\n", rank);
    return 1;
  }
  printf("rank %d: per-op timeout ok after %.0f ms\n", rank, waited);
  return 0;
}

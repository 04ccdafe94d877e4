/* The C API from C. Without HVRUN_COORDINATOR_ADDR (plain ctest, no launcher): the ABI check,
 * then the collectives as a single process, a job of size 1 with a coordinator of its own.
 * Under run_job (tests/support/worker_job.h, several ranks): collectives through the C API.
 * Exits 0 on success; prints what failed otherwise. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvrun/c_api.h"

static int failures = 0;

#define EXPECT(cond, ...)                       \
  do {                                          \
    if (!(cond)) {                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);             \
      fprintf(stderr, "\n");                    \
      ++failures;                               \
    }                                           \
  } while (0)

static int standalone_checks(void) {
  hvrun_worker_t* w = NULL;
  EXPECT(hvrun_abi_version() == HVRUN_C_ABI_VERSION, "abi version %d", hvrun_abi_version());
  hvrun_status_t s = hvrun_init(HVRUN_C_ABI_VERSION + 1, &w);
  EXPECT(s == HVRUN_ERR_FAILED_PRECONDITION && w == NULL, "ABI mismatch accepted: %d", s);
  EXPECT(strstr(hvrun_last_error(), "ABI") != NULL, "message: %s", hvrun_last_error());
  /* The version is the project's (CMake's project(VERSION)), passed in by the build. */
  EXPECT(strcmp(hvrun_version(), HVRUN_TEST_PROJECT_VERSION) == 0, "version %s, project %s",
         hvrun_version(), HVRUN_TEST_PROJECT_VERSION);

  /* A config not made with HVRUN_CONFIG_INITIALIZER is refused before anything is read from
   * it; so is one of a layout newer than this library's, and one whose size disagrees with its
   * version. */
  hvrun_config_t config;
  memset(&config, 0, sizeof config);
  s = hvrun_init_with_config(HVRUN_C_ABI_VERSION, &config, &w);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && w == NULL &&
             strstr(hvrun_last_error(), "HVRUN_CONFIG_INITIALIZER") != NULL,
         "zeroed config: %s: %s", hvrun_status_name(s), hvrun_last_error());
  hvrun_config_t newer = HVRUN_CONFIG_INITIALIZER;
  newer.version = HVRUN_CONFIG_VERSION + 1;
  s = hvrun_init_with_config(HVRUN_C_ABI_VERSION, &newer, &w);
  EXPECT(s == HVRUN_ERR_FAILED_PRECONDITION && w == NULL &&
             strstr(hvrun_last_error(), "newer") != NULL,
         "newer config layout: %s: %s", hvrun_status_name(s), hvrun_last_error());
  hvrun_config_t resized = HVRUN_CONFIG_INITIALIZER;
  resized.size = sizeof resized - 8;
  s = hvrun_init_with_config(HVRUN_C_ABI_VERSION, &resized, &w);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && w == NULL && strstr(hvrun_last_error(), "bytes"),
         "config of another size: %s: %s", hvrun_status_name(s), hvrun_last_error());
  /* A caller of ABI 1 passes the old, unversioned config: refused, saying to rebuild. */
  hvrun_config_t initialised = HVRUN_CONFIG_INITIALIZER;
  s = hvrun_init_with_config(1, &initialised, &w);
  EXPECT(s == HVRUN_ERR_FAILED_PRECONDITION && w == NULL &&
             strstr(hvrun_last_error(), "HVRUN_CONFIG_INITIALIZER") != NULL,
         "ABI 1 config: %s: %s", hvrun_status_name(s), hvrun_last_error());
  printf("standalone checks: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

/* The options struct: refused when not made with its initializer, or with fields that do not
 * apply to the call (never ignored); reducescatter honours the scale factors. */
static void options_checks(hvrun_worker_t* w, int rank, int size) {
  float x[2] = {1.0f, 2.0f};
  int64_t shape[1] = {2};
  hvrun_handle_t* h = NULL;
  hvrun_op_options_t zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  hvrun_status_t s = hvrun_allreduce_submit(w, "c.opt.zeroed", x, x, HVRUN_FLOAT32, 1, shape,
                                            HVRUN_SUM, &zeroed, &h);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL &&
             strstr(hvrun_last_error(), "HVRUN_OP_OPTIONS_INITIALIZER") != NULL,
         "zeroed options: %s: %s", hvrun_status_name(s), hvrun_last_error());
  hvrun_op_options_t newer = HVRUN_OP_OPTIONS_INITIALIZER;
  newer.version = HVRUN_OP_OPTIONS_VERSION + 1;
  s = hvrun_allreduce_submit(w, "c.opt.newer", x, x, HVRUN_FLOAT32, 1, shape, HVRUN_SUM, &newer,
                             &h);
  EXPECT(s == HVRUN_ERR_FAILED_PRECONDITION && h == NULL, "newer options: %s: %s",
         hvrun_status_name(s), hvrun_last_error());
  hvrun_op_options_t scaled = HVRUN_OP_OPTIONS_INITIALIZER;
  scaled.postscale = 0.5;
  s = hvrun_allgather_submit(w, "c.opt.gather", x, HVRUN_FLOAT32, 1, shape, &scaled, &h);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL && strstr(hvrun_last_error(), "postscale"),
         "allgather with a postscale: %s: %s", hvrun_status_name(s), hvrun_last_error());
  hvrun_op_options_t negative = HVRUN_OP_OPTIONS_INITIALIZER;
  negative.timeout_ms = -5;
  s = hvrun_barrier_submit(w, &negative, &h);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL, "negative timeout: %s: %s",
         hvrun_status_name(s), hvrun_last_error());

  /* Reducescatter of 4 rows of 2 float64 values, each rank's rows 1..8: with prescale 2 and
   * postscale 0.25 every element is sum(rank) * 2 * 0.25 of its unscaled value. */
  double rs[8];
  for (int i = 0; i < 8; ++i) rs[i] = (double)(i + 1);
  int64_t rs_shape[2] = {4, 2};
  hvrun_op_options_t rs_options = HVRUN_OP_OPTIONS_INITIALIZER;
  rs_options.prescale = 2.0;
  rs_options.postscale = 0.25;
  rs_options.timeout_ms = 60000; /* a per-op timeout that is not reached changes nothing */
  h = NULL;
  s = hvrun_reducescatter_submit(w, "c.rs.scaled", rs, HVRUN_FLOAT64, 2, rs_shape, HVRUN_SUM,
                                 &rs_options, &h);
  EXPECT(s == HVRUN_OK && h != NULL, "scaled reducescatter: %s", hvrun_last_error());
  if (h) {
    EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK, "scaled reducescatter: %s", hvrun_last_error());
    const void* data = NULL;
    int ndim = 0;
    const int64_t* oshape = NULL;
    int base = 4 / size, extra = 4 % size;
    int rows = base + (rank < extra ? 1 : 0);
    int first = rank * base + (rank < extra ? rank : extra);
    if (hvrun_handle_output(h, &data, NULL, &ndim, &oshape) == HVRUN_OK && rows > 0) {
      const double got = ((const double*)data)[0];
      const double want = (double)(first * 2 + 1) * size * 2.0 * 0.25;
      EXPECT(ndim == 2 && oshape[0] == rows && got == want,
             "scaled reducescatter: row %d value %g, want %g", first, got, want);
    }
    hvrun_handle_free(h);
  }
}

static int job_checks(void) {
  hvrun_worker_t* w = NULL;
  hvrun_status_t s;
  /* Odd ranks pass an explicit config (as another launcher would), even ranks read the
   * environment: both paths join one job. */
  int requested = atoi(getenv("HVRUN_RANK") ? getenv("HVRUN_RANK") : "0");
  if (requested % 2 == 1) {
    hvrun_config_t config = HVRUN_CONFIG_INITIALIZER;
    config.coordinator_address = getenv("HVRUN_COORDINATOR_ADDR");
    config.secret = getenv("HVRUN_SECRET");
    config.requested_rank = requested;
    config.local_rank = requested;
    config.host = "localhost";
    config.data_address = "127.0.0.1";
    config.start_timeout_ms = 20000;
    config.op_timeout_ms = -1;
    s = hvrun_init_with_config(HVRUN_C_ABI_VERSION, &config, &w);
  } else {
    s = hvrun_init(HVRUN_C_ABI_VERSION, &w);
  }
  if (s != HVRUN_OK) {
    fprintf(stderr, "init: %s: %s\n", hvrun_status_name(s), hvrun_last_error());
    return 1;
  }
  int rank = hvrun_rank(w), size = hvrun_size(w);
  options_checks(w, rank, size);

  /* Allreduce (sum, out of place) of 1001 floats. */
  enum { N = 1001 };
  static float in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = (float)(rank + 1);
  int64_t shape[2] = {N, 0};
  hvrun_handle_t* h = NULL;
  /* Through a deprecated call: the old entry points still work, as wrappers, for one release. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  s = hvrun_allreduce_async(w, "c.allreduce", in, out, HVRUN_FLOAT32, 1, shape, HVRUN_SUM, 1.0,
                            1.0, &h);
#pragma GCC diagnostic pop
  EXPECT(s == HVRUN_OK, "allreduce_async: %s", hvrun_last_error());
  if (h) {
    s = hvrun_handle_wait(h, 30000);
    EXPECT(s == HVRUN_OK, "allreduce: %s", hvrun_last_error());
    EXPECT(out[N - 1] == (float)(size * (size + 1) / 2), "allreduce value %f", out[N - 1]);
    EXPECT(hvrun_handle_poll(h) == 1, "poll after completion");
    hvrun_handle_free(h);
  }

  /* Allgather: rank r contributes r + 1 rows of 2 int32 values. */
  int32_t rows[8];
  for (int i = 0; i < 8; ++i) rows[i] = rank;
  int64_t gshape[2] = {rank + 1, 2};
  h = NULL;
  s = hvrun_allgather_submit(w, "c.allgather", rows, HVRUN_INT32, 2, gshape, NULL, &h);
  EXPECT(s == HVRUN_OK, "allgather_submit: %s", hvrun_last_error());
  if (h) {
    EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK, "allgather: %s", hvrun_last_error());
    const void* data = NULL;
    size_t bytes = 0;
    int ndim = 0;
    const int64_t* oshape = NULL;
    s = hvrun_handle_output(h, &data, &bytes, &ndim, &oshape);
    EXPECT(s == HVRUN_OK && ndim == 2, "output: %s", hvrun_last_error());
    if (s == HVRUN_OK) {
      EXPECT(oshape[0] == size * (size + 1) / 2 && oshape[1] == 2, "allgather shape %lld",
             (long long)oshape[0]);
      const int32_t* v = (const int32_t*)data;
      EXPECT(v[0] == 0 && v[bytes / 4 - 1] == size - 1, "allgather values");
    }
    hvrun_handle_free(h);
  }

  /* Broadcast from the last rank. */
  double b[3] = {rank, rank, rank};
  int64_t bshape[1] = {3};
  h = NULL;
  s = hvrun_broadcast_submit(w, "c.broadcast", b, HVRUN_FLOAT64, 1, bshape, size - 1, NULL, &h);
  EXPECT(s == HVRUN_OK, "broadcast_submit: %s", hvrun_last_error());
  if (h) {
    EXPECT(hvrun_handle_wait(h, -1) == HVRUN_OK, "broadcast: %s", hvrun_last_error());
    EXPECT(b[2] == size - 1, "broadcast value %f", b[2]);
    hvrun_handle_free(h);
  }

  /* Reducescatter: 5 rows summed, rank r keeps rows [first, first + rows). */
  int64_t rs_in[5] = {0, 1, 2, 3, 4};
  int64_t rs_shape[1] = {5};
  h = NULL;
  s = hvrun_reducescatter_submit(w, "c.reducescatter", rs_in, HVRUN_INT64, 1, rs_shape, HVRUN_SUM,
                                 NULL, &h);
  EXPECT(s == HVRUN_OK, "reducescatter_submit: %s", hvrun_last_error());
  if (h) {
    EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK, "reducescatter: %s", hvrun_last_error());
    const void* data = NULL;
    int ndim = 0;
    const int64_t* oshape = NULL;
    int base = 5 / size, extra = 5 % size;
    int rows = base + (rank < extra ? 1 : 0);
    int first = rank * base + (rank < extra ? rank : extra);
    if (hvrun_handle_output(h, &data, NULL, &ndim, &oshape) == HVRUN_OK) {
      EXPECT(ndim == 1 && oshape[0] == rows, "reducescatter rows %lld", (long long)oshape[0]);
      if (rows > 0) EXPECT(((const int64_t*)data)[0] == (int64_t)first * size, "reducescatter value");
    }
    hvrun_handle_free(h);
  }

  /* Alltoall with an even split: one row to every rank, carrying the sender's rank. */
  int32_t a2a[16];
  for (int i = 0; i < 16; ++i) a2a[i] = rank;
  int64_t a2a_shape[1] = {size};
  h = NULL;
  s = hvrun_alltoall_submit(w, "c.alltoall", a2a, HVRUN_INT32, 1, a2a_shape, NULL, NULL, &h);
  EXPECT(s == HVRUN_OK, "alltoall_submit: %s", hvrun_last_error());
  if (h) {
    EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK, "alltoall: %s", hvrun_last_error());
    const void* data = NULL;
    size_t bytes = 0;
    if (hvrun_handle_output(h, &data, &bytes, NULL, NULL) == HVRUN_OK) {
      EXPECT(bytes == (size_t)size * 4, "alltoall bytes %zu", bytes);
      EXPECT(((const int32_t*)data)[size - 1] == size - 1, "alltoall value");
    }
    hvrun_handle_free(h);
  }

  /* A bad argument is reported at once. */
  h = NULL;
  s = hvrun_broadcast_submit(w, "c.badroot", b, HVRUN_FLOAT64, 1, bshape, size + 5, NULL, &h);
  EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL, "bad root accepted: %d", s);

  /* A bounded wait returns DEADLINE_EXCEEDED while others have not submitted yet: rank 0
   * submits "c.late" before a barrier, the others only after it. */
  float late[4] = {1, 1, 1, 1};
  int64_t lshape[1] = {4};
  hvrun_handle_t* late_handle = NULL;
  if (rank == 0) {
    s = hvrun_allreduce_submit(w, "c.late", late, late, HVRUN_FLOAT32, 1, lshape, HVRUN_SUM, NULL,
                               &late_handle);
    EXPECT(s == HVRUN_OK, "late submit: %s", hvrun_last_error());
    s = hvrun_handle_wait(late_handle, 50);
    EXPECT(size == 1 || s == HVRUN_ERR_DEADLINE_EXCEEDED, "wait(50 ms) returned %s",
           hvrun_status_name(s));
    EXPECT(size == 1 || hvrun_handle_status(late_handle) == HVRUN_ERR_FAILED_PRECONDITION,
           "status of a running collective");
  }
  h = NULL;
  s = hvrun_barrier_submit(w, NULL, &h);
  EXPECT(s == HVRUN_OK && hvrun_handle_wait(h, 30000) == HVRUN_OK, "barrier: %s", hvrun_last_error());
  hvrun_handle_free(h);
  if (rank != 0) {
    s = hvrun_allreduce_submit(w, "c.late", late, late, HVRUN_FLOAT32, 1, lshape, HVRUN_SUM, NULL,
                               &late_handle);
    EXPECT(s == HVRUN_OK, "late submit: %s", hvrun_last_error());
  }
  if (late_handle) {
    EXPECT(hvrun_handle_wait(late_handle, 30000) == HVRUN_OK, "late: %s", hvrun_last_error());
    EXPECT(late[0] == (float)size, "late value %f", late[0]);
    hvrun_handle_free(late_handle);
  }

  /* Join: the last rank to join is reported to all. */
  h = NULL;
  s = hvrun_barrier_submit(w, NULL, &h);
  EXPECT(s == HVRUN_OK && hvrun_handle_wait(h, 30000) == HVRUN_OK, "barrier: %s", hvrun_last_error());
  hvrun_handle_free(h);
  h = NULL;
  s = hvrun_join_async(w, &h);
  EXPECT(s == HVRUN_OK && hvrun_handle_wait(h, 30000) == HVRUN_OK, "join: %s", hvrun_last_error());
  int last = hvrun_handle_join_result(h);
  EXPECT(last >= 0 && last < size, "join result %d", last);
  hvrun_handle_free(h);

  /* Checkpoints: rank 0 saves step 7, every rank scribbles over its state, restore brings
   * rank 0's saved values back everywhere. */
  char dir[256];
  snprintf(dir, sizeof dir, "/tmp/hvrun-c-ckpt-%s", getenv("HVRUN_JOB_ID") ? getenv("HVRUN_JOB_ID") : "x");
  setenv("HVRUN_CHECKPOINT_DIR", dir, 1);
  hvrun_checkpointer_t* ckpt = NULL;
  s = hvrun_checkpointer_create(w, &ckpt);
  EXPECT(s == HVRUN_OK && ckpt != NULL && hvrun_checkpointer_enabled(ckpt), "checkpointer: %s",
         hvrun_last_error());
  if (ckpt != NULL) {
    double state[5];
    for (int i = 0; i < 5; ++i) state[i] = 100.0 * rank + i;
    EXPECT(hvrun_checkpointer_add(ckpt, "state", state, sizeof state) == HVRUN_OK, "add: %s",
           hvrun_last_error());
    EXPECT(hvrun_checkpointer_add(ckpt, "state", state, sizeof state) == HVRUN_ERR_ALREADY_EXISTS,
           "a second 'state' must be refused");
    EXPECT(hvrun_checkpointer_save(ckpt, 7) == HVRUN_OK, "save: %s", hvrun_last_error());
    for (int i = 0; i < 5; ++i) state[i] = -1.0;
    int64_t step = -2;
    s = hvrun_checkpointer_restore(ckpt, &step);
    EXPECT(s == HVRUN_OK && step == 7, "restore: step %lld: %s", (long long)step, hvrun_last_error());
    for (int i = 0; i < 5; ++i) EXPECT(state[i] == (double)i, "restored state[%d] = %g", i, state[i]);
    hvrun_checkpointer_free(ckpt);
    if (rank == 0) {
      char file[320];
      snprintf(file, sizeof file, "%s/ckpt-000000000007.hvckpt", dir);
      remove(file);
      remove(dir);
    }
  }

  /* A name that is not UTF-8 is refused by the call itself, naming this rank and showing the
   * bytes escaped; the job goes on. */
  {
    char expected_rank[32];
    snprintf(expected_rank, sizeof expected_rank, "rank %d:", rank);
    float one[2] = {1.0f, 1.0f};
    int64_t one_shape[1] = {2};
    h = NULL;
    s = hvrun_allreduce_submit(w, "grad.\xff", one, one, HVRUN_FLOAT32, 1, one_shape, HVRUN_SUM,
                               NULL, &h);
    EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL, "non-UTF-8 name: status %d", s);
    EXPECT(strstr(hvrun_last_error(), expected_rank) != NULL &&
               strstr(hvrun_last_error(), "\"grad.\\xff\"") != NULL,
           "non-UTF-8 name: %s", hvrun_last_error());
    if (h) hvrun_handle_free(h);
    h = NULL;
    s = hvrun_allreduce_submit(w, "grad.ok", one, one, HVRUN_FLOAT32, 1, one_shape, HVRUN_SUM,
                               NULL, &h);
    EXPECT(s == HVRUN_OK && h != NULL, "allreduce after a refused name: %s", hvrun_last_error());
    if (h) {
      EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK && one[1] == (float)size,
             "allreduce after a refused name: %s", hvrun_last_error());
      hvrun_handle_free(h);
    }
  }

  /* Process sets: a view of {last rank, 0} (of {1} on two ranks) runs its collectives among
   * its members, numbered as the set numbers them; every rank adds and removes it. */
  if (size >= 2) {
    int members[2] = {size - 1, 0};
    const int count = size >= 3 ? 2 : 1;
    int id = -1;
    s = hvrun_add_process_set(w, members, count, &id);
    EXPECT(s == HVRUN_OK && id > 0, "add_process_set: %s", hvrun_last_error());
    hvrun_worker_t* view = NULL;
    hvrun_status_t viewed = hvrun_process_set_view(w, id, &view);
    const int member = rank == size - 1 || (count == 2 && rank == 0);
    if (!member) {
      EXPECT(viewed == HVRUN_ERR_INVALID_ARGUMENT && view == NULL, "view without this rank: %d",
             viewed);
    } else {
      EXPECT(viewed == HVRUN_OK && view != NULL, "view: %s", hvrun_last_error());
    }
    if (view) {
      EXPECT(hvrun_size(view) == count && hvrun_rank(view) == (rank == 0 ? 0 : count - 1),
             "view rank %d size %d", hvrun_rank(view), hvrun_size(view));
      float x[2] = {1.0f, (float)rank};
      int64_t x_shape[1] = {2};
      hvrun_handle_t* h = NULL;
      s = hvrun_allreduce_submit(view, "ps.c", x, x, HVRUN_FLOAT32, 1, x_shape, HVRUN_SUM, NULL,
                                 &h);
      EXPECT(s == HVRUN_OK && h != NULL, "allreduce on the view: %s", hvrun_last_error());
      if (h) {
        const float want = count == 2 ? (float)(size - 1) : (float)rank;
        EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK && x[0] == (float)count && x[1] == want,
               "allreduce on the view: %g %g (%s)", x[0], x[1], hvrun_last_error());
        hvrun_handle_free(h);
      }
      h = NULL;
      s = hvrun_join_async(view, &h);
      EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL, "join on a view: %d", s);
      /* The view runs on its set only. */
      hvrun_op_options_t elsewhere = HVRUN_OP_OPTIONS_INITIALIZER;
      elsewhere.process_set = id + 1;
      s = hvrun_barrier_submit(view, &elsewhere, &h);
      EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && h == NULL, "view on another set: %d", s);
      EXPECT(hvrun_finalize(view) == HVRUN_OK, "finalize the view: %s", hvrun_last_error());
    }
    /* The job's worker runs on the set when the options name it: a member's alltoall of one
     * row per member, splits counted over the set's members. */
    if (member) {
      hvrun_op_options_t on_set = HVRUN_OP_OPTIONS_INITIALIZER;
      on_set.process_set = id;
      int32_t rows[2] = {rank, rank};
      int64_t rows_shape[1] = {count};
      int64_t splits[2] = {1, 1};
      h = NULL;
      s = hvrun_alltoall_submit(w, "ps.c.alltoall", rows, HVRUN_INT32, 1, rows_shape, splits,
                                &on_set, &h);
      EXPECT(s == HVRUN_OK && h != NULL, "alltoall on the set: %s", hvrun_last_error());
      if (h) {
        size_t bytes = 0;
        EXPECT(hvrun_handle_wait(h, 30000) == HVRUN_OK &&
                   hvrun_handle_output(h, NULL, &bytes, NULL, NULL) == HVRUN_OK &&
                   bytes == (size_t)count * 4,
               "alltoall on the set: %zu bytes: %s", bytes, hvrun_last_error());
        hvrun_handle_free(h);
      }
    }
    s = hvrun_remove_process_set(w, id);
    EXPECT(s == HVRUN_OK, "remove_process_set: %s", hvrun_last_error());
    s = hvrun_remove_process_set(w, id);
    EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT, "removing it again: %d", s);
  }

  /* One name, two ops: rank 0 allreduces "c.same", the others allgather it. The C API submits
   * the name as given, so the ops disagree on one tensor: every rank fails at once with a
   * message naming both ops. A job of one rank has no other op to disagree with. */
  if (size > 1) {
    float same[2] = {1, 1};
    int64_t same_shape[1] = {2};
    h = NULL;
    s = rank == 0 ? hvrun_allreduce_submit(w, "c.same", same, same, HVRUN_FLOAT32, 1, same_shape,
                                          HVRUN_SUM, NULL, &h)
                  : hvrun_allgather_submit(w, "c.same", same, HVRUN_FLOAT32, 1, same_shape, NULL,
                                           &h);
    EXPECT(s == HVRUN_OK && h != NULL, "one name, two ops: submission: %s", hvrun_last_error());
    if (h) {
      s = hvrun_handle_wait(h, 10000);
      EXPECT(s == HVRUN_ERR_INVALID_ARGUMENT && strstr(hvrun_last_error(), "rank 0 sent allreduce") &&
                 strstr(hvrun_last_error(), "sent allgather"),
             "one name, two ops: %s: %s", hvrun_status_name(s), hvrun_last_error());
      hvrun_handle_free(h);
    }
  }

  /* A second init while this worker lives fails at once (ALREADY_EXISTS), not after the
   * start timeout. */
  {
    hvrun_worker_t* again = NULL;
    s = hvrun_init(HVRUN_C_ABI_VERSION, &again);
    EXPECT(s == HVRUN_ERR_ALREADY_EXISTS && again == NULL, "second init: %s: %s",
           hvrun_status_name(s), hvrun_last_error());
    if (again) hvrun_finalize(again);
  }

  s = hvrun_finalize(w);
  EXPECT(s == HVRUN_OK, "finalize: %s", hvrun_last_error());
  printf("rank %d: c api checks %s\n", rank, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

int main(void) {
  const char* address = getenv("HVRUN_COORDINATOR_ADDR");
  if (address == NULL || *address == '\0') {
    if (standalone_checks() != 0) return 1;
  }
  return job_checks();
}

/* hvrun's C API: the worker library for trainers in other languages and framework custom ops.
 *
 * Mirrors the C++ API (hvrun/hvrun.h; its contracts apply unchanged: every rank submits the
 * same names with matching metadata; buffers stay valid until the handle completes; a name is
 * not reused while in flight). No C++ types cross this boundary: opaque pointers, plain enums,
 * integer error codes. Every function returning hvrun_status_t sets a per-thread message that
 * hvrun_last_error() returns (valid until the next call on that thread).
 *
 * ABI, shaped to last as NCCL's is:
 *  - call hvrun_init*() with HVRUN_C_ABI_VERSION; a library that does not know the caller's ABI
 *    version refuses with HVRUN_ERR_FAILED_PRECONDITION naming both versions. This library
 *    takes callers of ABI versions HVRUN_C_ABI_OLDEST to HVRUN_C_ABI_VERSION.
 *  - the structs the caller fills (hvrun_config_t, hvrun_op_options_t) start with their size,
 *    a magic number and a layout version, set by their initializer macro
 *    (HVRUN_CONFIG_INITIALIZER, HVRUN_OP_OPTIONS_INITIALIZER), which every caller must use: new
 *    fields go at the end with a new version, and a library refuses a struct it does not know
 *    (not initialised: HVRUN_ERR_INVALID_ARGUMENT; a newer layout than its own:
 *    HVRUN_ERR_FAILED_PRECONDITION), naming what it got and what it knows.
 *  - the collectives take one options struct (device and stream, scale factors, process set,
 *    per-op timeout): hvrun_*_submit. The older hvrun_*_async and hvrun_*_async_on_device calls
 *    (join's aside) remain for this release as wrappers of them, deprecated
 *    (docs/worker-api.md).
 *
 * Threads: every function is thread-safe. A handle is freed exactly once, with
 * hvrun_handle_free(), after which it must not be used; a worker is freed once with
 * hvrun_finalize() after every handle of it was freed or completed. Handles complete on the
 * worker's background thread (the threads a worker runs: hvrun/hvrun.h).
 */
#ifndef HVRUN_C_API_H_
#define HVRUN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: versioned hvrun_config_t, hvrun_op_options_t and the hvrun_*_submit calls. Callers built
 * for 1 still run, except hvrun_init_with_config, whose config layout changed. */
#define HVRUN_C_ABI_VERSION 2
#define HVRUN_C_ABI_OLDEST 1

#if defined(__GNUC__) || defined(__clang__)
#define HVRUN_DEPRECATED(replacement) __attribute__((deprecated("use " replacement)))
#else
#define HVRUN_DEPRECATED(replacement)
#endif

/* Same values as hvrun::StatusCode (and gRPC's codes). */
typedef enum hvrun_status {
  HVRUN_OK = 0,
  HVRUN_ERR_CANCELLED = 1,
  HVRUN_ERR_INVALID_ARGUMENT = 3,
  HVRUN_ERR_DEADLINE_EXCEEDED = 4,
  HVRUN_ERR_NOT_FOUND = 5,
  HVRUN_ERR_ALREADY_EXISTS = 6,
  HVRUN_ERR_RESOURCE_EXHAUSTED = 8,
  HVRUN_ERR_FAILED_PRECONDITION = 9,
  HVRUN_ERR_ABORTED = 10,
  HVRUN_ERR_UNIMPLEMENTED = 12,
  HVRUN_ERR_INTERNAL = 13,
  HVRUN_ERR_UNAVAILABLE = 14,
  HVRUN_ERR_DATA_LOSS = 15,
  HVRUN_ERR_UNAUTHENTICATED = 16
} hvrun_status_t;

typedef enum hvrun_dtype {
  HVRUN_UINT8 = 1,
  HVRUN_INT8 = 2,
  HVRUN_INT32 = 3,
  HVRUN_INT64 = 4,
  HVRUN_FLOAT16 = 5,
  HVRUN_BFLOAT16 = 6,
  HVRUN_FLOAT32 = 7,
  HVRUN_FLOAT64 = 8,
  HVRUN_INT16 = 9
} hvrun_dtype_t;

typedef enum hvrun_reduce_op {
  HVRUN_SUM = 1,
  HVRUN_AVERAGE = 2,
  HVRUN_MIN = 3,
  HVRUN_MAX = 4,
  HVRUN_PRODUCT = 5
} hvrun_reduce_op_t;

/* Where a tensor lives (same values as hvrun::DeviceType). */
typedef enum hvrun_device_type { HVRUN_DEVICE_CPU = 0, HVRUN_DEVICE_CUDA = 1 } hvrun_device_type_t;

/* A tensor's device (hvrun_op_options_t::device). Host memory: {HVRUN_DEVICE_CPU, -1, NULL}.
 * stream: the cudaStream_t after whose queued work the data is ready (NULL = legacy default
 * stream); the result is ready in stream order on that same stream when the handle completes
 * (see hvrun::TensorView in hvrun/types.h). */
typedef struct hvrun_device {
  hvrun_device_type_t type;
  int index; /* CUDA device ordinal; -1 for host memory */
  void* stream;
} hvrun_device_t;

typedef struct hvrun_worker hvrun_worker_t;
typedef struct hvrun_handle hvrun_handle_t;

/* For launchers other than hvrun: how to reach the job (hvrun::Config).
 *   hvrun_config_t config = HVRUN_CONFIG_INITIALIZER;   (never a struct of your own making)
 *   config.coordinator_address = "10.0.0.1:40123"; ...
 * NULL strings / negative numbers mean "default". */
typedef struct hvrun_config {
  size_t size;           /* sizeof(hvrun_config_t) as the caller was compiled */
  unsigned int magic;    /* HVRUN_CONFIG_MAGIC */
  unsigned int version;  /* HVRUN_CONFIG_VERSION: the layout below */
  /* Version 1: */
  const char* coordinator_address;
  const char* secret;
  int requested_rank;
  int local_rank;
  const char* host;
  const char* data_address;
  int64_t start_timeout_ms;
  int64_t op_timeout_ms;
} hvrun_config_t;

#define HVRUN_CONFIG_MAGIC 0x68766366u /* "hvcf" */
#define HVRUN_CONFIG_VERSION 1
#define HVRUN_CONFIG_INITIALIZER                                                           \
  {                                                                                        \
    sizeof(hvrun_config_t), HVRUN_CONFIG_MAGIC, HVRUN_CONFIG_VERSION, NULL, NULL, -1, -1, \
        NULL, NULL, -1, -1                                                                 \
  }

/* What a collective runs with besides its tensor (NULL where a call takes one: all defaults).
 *   hvrun_op_options_t options = HVRUN_OP_OPTIONS_INITIALIZER;
 *   options.postscale = 1.0 / hvrun_size(worker);
 * A field that does not apply to the call is refused when set (HVRUN_ERR_INVALID_ARGUMENT),
 * never ignored: scale factors apply to allreduce and reducescatter only, a device to the calls
 * with a tensor. */
typedef struct hvrun_op_options {
  size_t size;           /* sizeof(hvrun_op_options_t) as the caller was compiled */
  unsigned int magic;    /* HVRUN_OP_OPTIONS_MAGIC */
  unsigned int version;  /* HVRUN_OP_OPTIONS_VERSION: the layout below */
  /* Version 1: */
  /* Where the tensors live (CUDA: data pointers are device pointers, input and output on this
   * device, ready in stream order on device.stream). Default: host memory. */
  hvrun_device_t device;
  double prescale;  /* multiplies every input before the reduction (default 1.0) */
  double postscale; /* multiplies the result, after Average's division (default 1.0) */
  /* The process set to run on (hvrun_add_process_set's id); 0 = the worker's own: every rank,
   * or the view's set for a view (which runs on no other). */
  int process_set;
  /* Per-op timeout (> 0): when the op has not completed within it, this rank aborts the job
   * with a reason naming the op and the timeout, and every pending handle (this one's too)
   * fails with HVRUN_ERR_ABORTED: a collective cannot be given up on one rank alone. 0: none
   * of its own (the job's --op-timeout still bounds data-plane transfers and waits). */
  int64_t timeout_ms;
} hvrun_op_options_t;

#define HVRUN_OP_OPTIONS_MAGIC 0x68766f70u /* "hvop" */
#define HVRUN_OP_OPTIONS_VERSION 1
#define HVRUN_OP_OPTIONS_INITIALIZER                                                    \
  {                                                                                     \
    sizeof(hvrun_op_options_t), HVRUN_OP_OPTIONS_MAGIC, HVRUN_OP_OPTIONS_VERSION,       \
        {HVRUN_DEVICE_CPU, -1, NULL}, 1.0, 1.0, 0, 0                                    \
  }

int hvrun_abi_version(void);
const char* hvrun_version(void);
const char* hvrun_last_error(void);
const char* hvrun_status_name(hvrun_status_t status);

/* Reads the environment hvrun sets. */
hvrun_status_t hvrun_init(int abi_version, hvrun_worker_t** worker);
/* How to reach the job from `config` (made with HVRUN_CONFIG_INITIALIZER; ABI version 2 or
   later); the data plane's tuning (HVRUN_CPU_BACKEND, HVRUN_FAST_PATH, ...) from the
   environment, as hvrun_init. */
hvrun_status_t hvrun_init_with_config(int abi_version, const hvrun_config_t* config,
                                      hvrun_worker_t** worker);
/* Shuts down (idempotent, see hvrun::Worker::shutdown) and frees the worker. */
hvrun_status_t hvrun_finalize(hvrun_worker_t* worker);
hvrun_status_t hvrun_shutdown(hvrun_worker_t* worker);
/* Shuts down as a failed rank (hvrun::Worker::shutdown_with_failure): the coordinator aborts
 * the job with "rank R on host H (pid P) failed: <reason>" instead of hearing Goodbye. The
 * worker still needs hvrun_finalize(). */
hvrun_status_t hvrun_shutdown_with_failure(hvrun_worker_t* worker, const char* reason);
void hvrun_abort(hvrun_worker_t* worker, const char* reason);

/* Telemetry (hvrun::Worker::mark_step / mark_phase / start_timeline / stop_timeline).
 * hvrun_mark_step, hvrun_mark_phase: worker NULL = every live worker of the process.
 * hvrun_mark_phase: phase `name` of this step starts now (NULL or "" ends the running one). */
void hvrun_mark_step(hvrun_worker_t* worker);
void hvrun_mark_phase(hvrun_worker_t* worker, const char* name);
hvrun_status_t hvrun_start_timeline(hvrun_worker_t* worker, const char* path);
hvrun_status_t hvrun_stop_timeline(hvrun_worker_t* worker);

int hvrun_rank(const hvrun_worker_t* worker);
/* Elastic jobs (hvrun::Worker::hosts_updated): 1 once slots were added since this init, else 0. */
int hvrun_hosts_updated(const hvrun_worker_t* worker);
int hvrun_size(const hvrun_worker_t* worker);
int hvrun_local_rank(const hvrun_worker_t* worker);
int hvrun_local_size(const hvrun_worker_t* worker);
int hvrun_cross_rank(const hvrun_worker_t* worker);
int hvrun_cross_size(const hvrun_worker_t* worker);

/* Asynchronous collectives. On HVRUN_OK *handle is set; argument errors are returned at once
 * (and also leave no handle). `output` == `input` means in place. `options`: NULL, or made with
 * HVRUN_OP_OPTIONS_INITIALIZER (see hvrun_op_options_t). */
hvrun_status_t hvrun_allreduce_submit(hvrun_worker_t* worker, const char* name, const void* input,
                                      void* output, hvrun_dtype_t dtype, int ndim,
                                      const int64_t* shape, hvrun_reduce_op_t op,
                                      const hvrun_op_options_t* options, hvrun_handle_t** handle);
hvrun_status_t hvrun_allgather_submit(hvrun_worker_t* worker, const char* name, const void* input,
                                      hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                      const hvrun_op_options_t* options, hvrun_handle_t** handle);
/* root_rank: a job rank (a member of the set on a process set). */
hvrun_status_t hvrun_broadcast_submit(hvrun_worker_t* worker, const char* name, void* inout,
                                      hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                      int root_rank, const hvrun_op_options_t* options,
                                      hvrun_handle_t** handle);
/* splits: one row count per member of the set the call runs on, or NULL for an even split. */
hvrun_status_t hvrun_alltoall_submit(hvrun_worker_t* worker, const char* name, const void* input,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     const int64_t* splits, const hvrun_op_options_t* options,
                                     hvrun_handle_t** handle);
hvrun_status_t hvrun_reducescatter_submit(hvrun_worker_t* worker, const char* name,
                                          const void* input, hvrun_dtype_t dtype, int ndim,
                                          const int64_t* shape, hvrun_reduce_op_t op,
                                          const hvrun_op_options_t* options,
                                          hvrun_handle_t** handle);
hvrun_status_t hvrun_barrier_submit(hvrun_worker_t* worker, const hvrun_op_options_t* options,
                                    hvrun_handle_t** handle);
/* Join is of the job (the global set; refused on a view) and takes no options: it waits, by
 * design, for the ranks that still have work. */
hvrun_status_t hvrun_join_async(hvrun_worker_t* worker, hvrun_handle_t** handle);

/* Deprecated, kept for one release: each is hvrun_*_submit with the options its arguments
 * give (device NULL = host memory), and will be removed in the next. */
HVRUN_DEPRECATED("hvrun_allreduce_submit")
hvrun_status_t hvrun_allreduce_async(hvrun_worker_t* worker, const char* name, const void* input,
                                     void* output, hvrun_dtype_t dtype, int ndim,
                                     const int64_t* shape, hvrun_reduce_op_t op, double prescale,
                                     double postscale, hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_allgather_submit")
hvrun_status_t hvrun_allgather_async(hvrun_worker_t* worker, const char* name, const void* input,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_broadcast_submit")
hvrun_status_t hvrun_broadcast_async(hvrun_worker_t* worker, const char* name, void* inout,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     int root_rank, hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_alltoall_submit")
hvrun_status_t hvrun_alltoall_async(hvrun_worker_t* worker, const char* name, const void* input,
                                    hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                    const int64_t* splits, hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_reducescatter_submit")
hvrun_status_t hvrun_reducescatter_async(hvrun_worker_t* worker, const char* name,
                                         const void* input, hvrun_dtype_t dtype, int ndim,
                                         const int64_t* shape, hvrun_reduce_op_t op,
                                         hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_barrier_submit")
hvrun_status_t hvrun_barrier_async(hvrun_worker_t* worker, hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_allreduce_submit")
hvrun_status_t hvrun_allreduce_async_on_device(hvrun_worker_t* worker, const char* name,
                                               const void* input, void* output,
                                               hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, hvrun_reduce_op_t op,
                                               double prescale, double postscale,
                                               const hvrun_device_t* device,
                                               hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_allgather_submit")
hvrun_status_t hvrun_allgather_async_on_device(hvrun_worker_t* worker, const char* name,
                                               const void* input, hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, const hvrun_device_t* device,
                                               hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_broadcast_submit")
hvrun_status_t hvrun_broadcast_async_on_device(hvrun_worker_t* worker, const char* name,
                                               void* inout, hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, int root_rank,
                                               const hvrun_device_t* device,
                                               hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_alltoall_submit")
hvrun_status_t hvrun_alltoall_async_on_device(hvrun_worker_t* worker, const char* name,
                                              const void* input, hvrun_dtype_t dtype, int ndim,
                                              const int64_t* shape, const int64_t* splits,
                                              const hvrun_device_t* device,
                                              hvrun_handle_t** handle);
HVRUN_DEPRECATED("hvrun_reducescatter_submit")
hvrun_status_t hvrun_reducescatter_async_on_device(hvrun_worker_t* worker, const char* name,
                                                   const void* input, hvrun_dtype_t dtype,
                                                   int ndim, const int64_t* shape,
                                                   hvrun_reduce_op_t op,
                                                   const hvrun_device_t* device,
                                                   hvrun_handle_t** handle);
/* Where hvrun_handle_output()'s data lives: for CUDA inputs a device pointer owned by the
 * handle (freed stream-ordered on `device->stream` by hvrun_handle_free()). */
hvrun_status_t hvrun_handle_output_device(const hvrun_handle_t* handle, hvrun_device_t* device);

/* Optional: allocate library-allocated CUDA outputs with the caller's allocator (e.g. a
 * framework's caching allocator). alloc returns a device pointer (NULL = out of memory) usable
 * in stream order on `stream`; release frees it. alloc runs on the worker's background thread,
 * release on the thread that drops the output's last owner (usually hvrun_handle_free()).
 * NULL alloc restores the default (cudaMallocAsync / cudaFreeAsync on the input's stream). */
typedef void* (*hvrun_device_alloc_fn)(void* user_data, int device_index, size_t bytes,
                                       void* stream);
typedef void (*hvrun_device_release_fn)(void* user_data, int device_index, void* ptr,
                                        void* stream);
hvrun_status_t hvrun_set_device_allocator(hvrun_worker_t* worker, hvrun_device_alloc_fn alloc,
                                          hvrun_device_release_fn release, void* user_data);

/* 1 when complete (successfully or not), else 0. */
int hvrun_handle_poll(const hvrun_handle_t* handle);
/* Waits at most timeout_ms (< 0: the worker's default operation timeout). Returns the
 * operation's status, or HVRUN_ERR_DEADLINE_EXCEEDED while it is still running. */
hvrun_status_t hvrun_handle_wait(hvrun_handle_t* handle, int64_t timeout_ms);
/* Final status (HVRUN_ERR_FAILED_PRECONDITION while running); message via hvrun_last_error(). */
hvrun_status_t hvrun_handle_status(hvrun_handle_t* handle);
/* allgather / alltoall / reducescatter result, owned by the handle: valid until it is freed.
 * *shape points to *ndim dimensions. */
hvrun_status_t hvrun_handle_output(const hvrun_handle_t* handle, const void** data,
                                   size_t* bytes, int* ndim, const int64_t** shape);
/* join: the last rank to join (-1 otherwise). */
int hvrun_handle_join_result(const hvrun_handle_t* handle);
void hvrun_handle_free(hvrun_handle_t* handle);

/* ---- Process sets (hvrun.h, Worker::add_process_set): every rank calls add and remove, in the
 * same order, members or not. A view is a worker handle whose collectives run on one set:
 * hvrun_rank/hvrun_size are the set's, alltoall's splits have one entry per member, broadcast's
 * root is a job rank; join and checkpointers are refused on a view. hvrun_shutdown and
 * hvrun_finalize of a view free only the view (free views before the job's worker);
 * hvrun_shutdown_with_failure(view) reports this rank's failure as on the job's worker. */
hvrun_status_t hvrun_add_process_set(hvrun_worker_t* worker, const int* ranks, int count,
                                     int* process_set_id);
hvrun_status_t hvrun_remove_process_set(hvrun_worker_t* worker, int process_set_id);
hvrun_status_t hvrun_process_set_view(hvrun_worker_t* worker, int process_set_id,
                                      hvrun_worker_t** view);

/* ---- Checkpoints (hvrun/checkpoint.h): registered buffers saved by rank 0 every K steps, and
 * restored after a restart (hvrun --max-restarts) from the newest complete checkpoint. Options
 * come from hvrun's --checkpoint-dir/-every/-keep/-name (HVRUN_CHECKPOINT_* variables); without
 * a directory checkpoints are off and save/restore do nothing. */
typedef struct hvrun_checkpointer hvrun_checkpointer_t;
hvrun_status_t hvrun_checkpointer_create(hvrun_worker_t* worker, hvrun_checkpointer_t** out);
void hvrun_checkpointer_free(hvrun_checkpointer_t* checkpointer);
int hvrun_checkpointer_enabled(const hvrun_checkpointer_t* checkpointer);
/* `bytes` bytes at `data`, saved from and restored into that memory; same names, order and
 * sizes on every rank. */
hvrun_status_t hvrun_checkpointer_add(hvrun_checkpointer_t* checkpointer, const char* name,
                                      void* data, size_t bytes);
/* Rank 0 writes the checkpoint of `step` now (other ranks return at once). */
hvrun_status_t hvrun_checkpointer_save(hvrun_checkpointer_t* checkpointer, int64_t step);
/* save() when --checkpoint-every K > 0 divides `step`; *saved (may be NULL) = 1 if rank 0 wrote. */
hvrun_status_t hvrun_checkpointer_save_if_due(hvrun_checkpointer_t* checkpointer, int64_t step,
                                              int* saved);
/* Collective: *step = the step of the checkpoint loaded into every rank's buffers, or -1. */
hvrun_status_t hvrun_checkpointer_restore(hvrun_checkpointer_t* checkpointer, int64_t* step);

/* Elastic trainers (hvrun/elastic.h, docs/elastic.md): buffers committed, restored and synced
 * as bytes, and the loop that resets after a membership change. hvrun_elastic_run initialises
 * the worker itself and calls `train` with it (valid during that call only: never finalize it),
 * again after every reset; `on_reset` (may be NULL) runs after each reset with the new worker.
 * `train` returns HVRUN_OK when training is done, or the status of what failed (return
 * hvrun_elastic_commit's HVRUN_ERR_UNAVAILABLE as it is: slots were added). */
typedef struct hvrun_elastic_state hvrun_elastic_state_t;
typedef hvrun_status_t (*hvrun_elastic_train_fn)(hvrun_worker_t* worker,
                                                 hvrun_elastic_state_t* state, void* user_data);
typedef void (*hvrun_elastic_reset_fn)(hvrun_worker_t* worker, void* user_data);
hvrun_elastic_state_t* hvrun_elastic_state_new(void);
void hvrun_elastic_state_free(hvrun_elastic_state_t* state);
hvrun_status_t hvrun_elastic_state_add(hvrun_elastic_state_t* state, const char* name, void* data,
                                       size_t bytes);
hvrun_status_t hvrun_elastic_commit(hvrun_elastic_state_t* state, hvrun_worker_t* worker);
hvrun_status_t hvrun_elastic_run(int abi_version, hvrun_elastic_state_t* state,
                                 hvrun_elastic_train_fn train, hvrun_elastic_reset_fn on_reset,
                                 void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* HVRUN_C_API_H_ */

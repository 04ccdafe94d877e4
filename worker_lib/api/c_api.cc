// The C API (hvrun/c_api.h) over hvrun::Worker. Nothing here may throw across the boundary.
#include "hvrun/c_api.h"
#include "hvrun/elastic.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "hvrun/checkpoint.h"
#include "hvrun/hvrun.h"
#include "worker_lib/config_environment.h"

// The job's worker, or a view of it whose collectives run on one process set (rank and size
// are then the set's; finalizing a view frees only the view).
struct hvrun_worker {
  std::unique_ptr<hvrun::Worker> owned;  // null in a view, and in hvrun_elastic_run's worker
  hvrun::Worker* worker = nullptr;
  bool borrowed = false;  // hvrun_elastic_run's: the job's worker, owned by the loop
  hvrun::ProcessSet set;
  int set_rank = -1;
  int set_size = -1;
  bool is_view() const { return owned == nullptr && !borrowed; }
};

struct hvrun_checkpointer {
  hvrun::Checkpointer checkpointer;
};

struct hvrun_elastic_state {
  hvrun::elastic::State state;
};

struct hvrun_handle {
  hvrun::Handle handle;
  hvrun::Worker* worker;
  std::once_flag output_once;         // output_shape is filled once, by the first caller
  std::vector<int64_t> output_shape;  // kept so the pointer handed out stays valid
};

namespace {

thread_local std::string t_last_error;

hvrun_status_t record(const hvrun::Status& status) {
  t_last_error = status.is_ok() ? std::string() : status.message();
  return static_cast<hvrun_status_t>(static_cast<int>(status.code()));
}

hvrun_status_t bad(const std::string& message) {
  return record(hvrun::invalid_argument(message));
}

bool shape_ok(int ndim, const int64_t* shape) { return ndim >= 0 && (ndim == 0 || shape); }

std::vector<int64_t> to_shape(int ndim, const int64_t* shape) {
  return ndim > 0 ? std::vector<int64_t>(shape, shape + ndim) : std::vector<int64_t>{};
}

template <typename Fn>
hvrun_status_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return record(hvrun::internal_error(std::string("hvrun C API: ") + e.what()));
  }
}

hvrun_status_t hand_out(hvrun_worker_t* w, hvrun::Handle h, hvrun_handle_t** out) {
  // Argument errors are reported at once; anything later through the handle.
  if (h.poll()) {
    hvrun::Status s = h.status();
    if (s.code() == hvrun::StatusCode::kInvalidArgument) return record(s);
  }
  auto* handle = new hvrun_handle;
  handle->handle = std::move(h);
  handle->worker = w->worker;
  *out = handle;
  return record(hvrun::Status::ok());
}

hvrun_status_t check_common(hvrun_worker_t* w, const char* name, int dtype, int ndim,
                            const int64_t* shape, hvrun_handle_t** handle) {
  if (!w || !handle) return bad("null worker or handle pointer");
  if (!name) return bad("null tensor name");
  if (!hvrun::is_valid_dtype(dtype)) return bad("unknown dtype " + std::to_string(dtype));
  if (!shape_ok(ndim, shape)) return bad(std::string("tensor '") + name + "': bad ndim/shape");
  return HVRUN_OK;
}

// A versioned struct's header against the layout this library knows: `what` names the
// struct, `initializer` the macro that makes it. Only the header is read before this passes, so
// a struct of an older or unknown layout is never read past its end.
hvrun_status_t check_layout(const char* what, const char* initializer, size_t size,
                            unsigned magic, unsigned version, unsigned want_magic,
                            unsigned known_version, size_t known_size) {
  if (magic != want_magic || version == 0)
    return bad(std::string(what) + " was not made with " + initializer + " (magic " +
               std::to_string(magic) + ", version " + std::to_string(version) +
               "): start from " + initializer + ", then set the fields you need");
  if (version > known_version)
    return record(hvrun::failed_precondition(
        std::string(what) + " has layout version " + std::to_string(version) + " (" +
        std::to_string(size) + " bytes), newer than this libhvrun " + hvrun::version() +
        " knows (version " + std::to_string(known_version) +
        "): the caller was built against a newer hvrun; run it with that libhvrun"));
  if (size != known_size)
    return bad(std::string(what) + " of layout version " + std::to_string(version) + " is " +
               std::to_string(size) + " bytes, but that layout is " +
               std::to_string(known_size) + " bytes: the caller's header and struct disagree; "
               "rebuild it against one hvrun/c_api.h");
  return HVRUN_OK;
}

// An op's options, checked, as the C++ API takes them.
struct OpSettings {
  hvrun::Device device;
  void* stream = nullptr;
  double prescale = 1.0;
  double postscale = 1.0;
  hvrun::ProcessSet set;
  std::chrono::milliseconds timeout{0};

  hvrun::OpOptions op_options() const { return {set, timeout}; }
  hvrun::AllreduceOptions reduce_options(hvrun_reduce_op_t op) const {
    return {static_cast<hvrun::ReduceOp>(op), prescale, postscale, set, timeout};
  }
};

// What the call `call` ("allgather 'x'") runs with. `scales`, `tensor`: whether scale factors
// and a device apply to it; set, they are refused where they do not (never ignored).
hvrun_status_t settings_of(const hvrun_worker_t* w, const hvrun_op_options_t* o,
                           const std::string& call, bool scales, bool tensor, OpSettings& out) {
  out.set = w->set;
  if (!o) return HVRUN_OK;
  if (auto s = check_layout("hvrun_op_options_t", "HVRUN_OP_OPTIONS_INITIALIZER", o->size,
                            o->magic, o->version, HVRUN_OP_OPTIONS_MAGIC,
                            HVRUN_OP_OPTIONS_VERSION, sizeof(hvrun_op_options_t));
      s != HVRUN_OK)
    return s;
  const hvrun_device_t& d = o->device;
  if (d.type != HVRUN_DEVICE_CPU && d.type != HVRUN_DEVICE_CUDA)
    return bad(call + ": unknown device type " + std::to_string(static_cast<int>(d.type)));
  if (!tensor && (d.type != HVRUN_DEVICE_CPU || d.stream))
    return bad(call + " has no tensor: leave options.device as HVRUN_OP_OPTIONS_INITIALIZER "
               "sets it");
  out.device = {static_cast<hvrun::DeviceType>(d.type), d.index};
  out.stream = d.stream;
  if (!scales && (o->prescale != 1.0 || o->postscale != 1.0))
    return bad(call + ": prescale and postscale apply to allreduce and reducescatter only");
  out.prescale = o->prescale;
  out.postscale = o->postscale;
  if (o->timeout_ms < 0)
    return bad(call + ": timeout_ms " + std::to_string(o->timeout_ms) +
               " is negative (0: no per-op timeout)");
  out.timeout = std::chrono::milliseconds(o->timeout_ms);
  if (o->process_set != 0 && o->process_set != w->set.id) {
    if (w->is_view())
      return bad(call + ": a view of process set " + std::to_string(w->set.id) +
                 " runs on that set only, not on set " + std::to_string(o->process_set));
    out.set = hvrun::ProcessSet{o->process_set};
  }
  return HVRUN_OK;
}

// The members of the set the call runs on (alltoall's splits count them).
hvrun::Result<int> set_size(const hvrun_worker_t* w, hvrun::ProcessSet set) {
  if (set == w->set) return w->is_view() ? w->set_size : w->worker->size();
  auto ranks = w->worker->process_set_ranks(set);
  if (!ranks.is_ok()) return ranks.status();
  return static_cast<int>(ranks->size());
}

// The old calls' device argument as options (NULL = host memory).
hvrun_op_options_t options_on(const hvrun_device_t* device) {
  hvrun_op_options_t o = HVRUN_OP_OPTIONS_INITIALIZER;
  if (device) o.device = *device;
  return o;
}

std::string call_text(const char* op, const char* name) {
  return std::string(op) + " '" + (name ? name : "") + "'";
}

}  // namespace

extern "C" {

int hvrun_abi_version(void) { return HVRUN_C_ABI_VERSION; }
const char* hvrun_version(void) { return hvrun::version(); }
const char* hvrun_last_error(void) { return t_last_error.c_str(); }

const char* hvrun_status_name(hvrun_status_t status) {
  static thread_local std::string name;
  name = std::string(hvrun::status_code_name(static_cast<hvrun::StatusCode>(status)));
  return name.c_str();
}

}  // extern "C"

namespace {

// The caller's ABI version is one this library serves: `call` names the entry point.
hvrun_status_t check_abi(int abi_version, const char* call) {
  if (abi_version >= HVRUN_C_ABI_OLDEST && abi_version <= HVRUN_C_ABI_VERSION) return HVRUN_OK;
  return record(hvrun::failed_precondition(
      std::string("hvrun C ABI mismatch in ") + call + ": caller built against version " +
      std::to_string(abi_version) + ", libhvrun " + hvrun::version() + " provides versions " +
      std::to_string(HVRUN_C_ABI_OLDEST) + " to " + std::to_string(HVRUN_C_ABI_VERSION) +
      "; rebuild the caller"));
}

hvrun_status_t init_common(int abi_version, const hvrun::Result<hvrun::Config>& config,
                           hvrun_worker_t** worker) {
  if (!worker) return bad("null worker pointer");
  *worker = nullptr;
  if (auto s = check_abi(abi_version, "hvrun_init"); s != HVRUN_OK) return s;
  if (!config.is_ok()) return record(config.status());
  auto w = hvrun::Worker::init(*config);
  if (!w.is_ok()) return record(w.status());
  auto* made = new hvrun_worker;
  made->owned = std::move(w).value();
  made->worker = made->owned.get();
  *worker = made;
  return record(hvrun::Status::ok());
}

}  // namespace

extern "C" {

hvrun_status_t hvrun_init(int abi_version, hvrun_worker_t** worker) {
  return guarded([&] { return init_common(abi_version, hvrun::Config::from_environment(), worker); });
}

hvrun_status_t hvrun_init_with_config(int abi_version, const hvrun_config_t* c,
                                      hvrun_worker_t** worker) {
  return guarded([&] {
    if (!worker) return bad("null worker pointer");
    *worker = nullptr;
    if (auto s = check_abi(abi_version, "hvrun_init_with_config"); s != HVRUN_OK) return s;
    if (abi_version < 2)
      return record(hvrun::failed_precondition(
          "hvrun_init_with_config: a caller built for C ABI version " +
          std::to_string(abi_version) + " passes hvrun_config_t without its size and version; "
          "rebuild it against this hvrun/c_api.h and make the config with "
          "HVRUN_CONFIG_INITIALIZER"));
    if (!c) return bad("null config");
    if (auto s = check_layout("hvrun_config_t", "HVRUN_CONFIG_INITIALIZER", c->size, c->magic,
                              c->version, HVRUN_CONFIG_MAGIC, HVRUN_CONFIG_VERSION,
                              sizeof(hvrun_config_t));
        s != HVRUN_OK)
      return s;
    hvrun::Config config;
    if (c->coordinator_address) config.coordinator_address = c->coordinator_address;
    if (c->secret) config.secret = c->secret;
    config.requested_rank = c->requested_rank;
    config.local_rank = c->local_rank;
    if (c->host) config.host = c->host;
    if (c->data_address) config.data_address = c->data_address;
    if (c->start_timeout_ms > 0) config.start_timeout = std::chrono::milliseconds(c->start_timeout_ms);
    if (c->op_timeout_ms > 0) config.op_timeout = std::chrono::milliseconds(c->op_timeout_ms);
    if (hvrun::Status s = hvrun::detail::apply_tuning_from_environment(config); !s.is_ok())
      return record(s);
    return init_common(abi_version, config, worker);
  });
}

hvrun_status_t hvrun_shutdown(hvrun_worker_t* w) {
  if (!w) return bad("null worker");
  if (w->is_view()) return record(hvrun::Status::ok());  // the job's worker shuts down
  return guarded([&] { return record(w->worker->shutdown()); });
}

hvrun_status_t hvrun_shutdown_with_failure(hvrun_worker_t* w, const char* reason) {
  if (!w) return bad("null worker");
  // A view too: the failure is this rank's, and it ends the job as from the job's worker.
  return guarded([&] {
    return record(w->worker->shutdown_with_failure(reason ? reason : "(no reason given)"));
  });
}

hvrun_status_t hvrun_finalize(hvrun_worker_t* w) {
  if (!w) return record(hvrun::Status::ok());
  hvrun_status_t s = hvrun_shutdown(w);
  delete w;
  return s;
}

void hvrun_abort(hvrun_worker_t* w, const char* reason) {
  if (w) w->worker->abort(reason ? reason : "aborted through the C API");
}

void hvrun_mark_step(hvrun_worker_t* w) {
  if (w) w->worker->mark_step();
  else hvrun::mark_step();
}

void hvrun_mark_phase(hvrun_worker_t* w, const char* name) {
  const std::string_view phase = name ? std::string_view(name) : std::string_view();
  if (w) w->worker->mark_phase(phase);
  else hvrun::mark_phase(phase);
}

hvrun_status_t hvrun_start_timeline(hvrun_worker_t* w, const char* path) {
  if (!w) return bad("null worker");
  if (!path) return bad("null timeline path");
  return guarded([&] { return record(w->worker->start_timeline(path)); });
}

hvrun_status_t hvrun_stop_timeline(hvrun_worker_t* w) {
  if (!w) return bad("null worker");
  return guarded([&] { return record(w->worker->stop_timeline()); });
}

int hvrun_rank(const hvrun_worker_t* w) {
  return !w ? -1 : w->is_view() ? w->set_rank : w->worker->rank();
}
int hvrun_hosts_updated(const hvrun_worker_t* w) {
  return w && w->worker && w->worker->hosts_updated() ? 1 : 0;
}
int hvrun_size(const hvrun_worker_t* w) {
  return !w ? -1 : w->is_view() ? w->set_size : w->worker->size();
}
int hvrun_local_rank(const hvrun_worker_t* w) { return w ? w->worker->local_rank() : -1; }
int hvrun_local_size(const hvrun_worker_t* w) { return w ? w->worker->local_size() : -1; }
int hvrun_cross_rank(const hvrun_worker_t* w) { return w ? w->worker->cross_rank() : -1; }
int hvrun_cross_size(const hvrun_worker_t* w) { return w ? w->worker->cross_size() : -1; }

hvrun_status_t hvrun_allreduce_submit(hvrun_worker_t* w, const char* name, const void* input,
                                      void* output, hvrun_dtype_t dtype, int ndim,
                                      const int64_t* shape, hvrun_reduce_op_t op,
                                      const hvrun_op_options_t* options, hvrun_handle_t** handle) {
  if (auto s = check_common(w, name, dtype, ndim, shape, handle); s != HVRUN_OK) return s;
  if (!hvrun::is_valid_reduce_op(op)) return bad("unknown reduce op " + std::to_string(op));
  OpSettings at;
  if (auto s = settings_of(w, options, call_text("allreduce", name), true, true, at); s != HVRUN_OK)
    return s;
  return guarded([&] {
    auto t = static_cast<hvrun::DataType>(dtype);
    return hand_out(w,
                    w->worker->allreduce_async(
                        name, {input, t, to_shape(ndim, shape), at.device, at.stream},
                        {output, t, to_shape(ndim, shape), at.device, at.stream},
                        at.reduce_options(op)),
                    handle);
  });
}

hvrun_status_t hvrun_allgather_submit(hvrun_worker_t* w, const char* name, const void* input,
                                      hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                      const hvrun_op_options_t* options, hvrun_handle_t** handle) {
  if (auto s = check_common(w, name, dtype, ndim, shape, handle); s != HVRUN_OK) return s;
  OpSettings at;
  if (auto s = settings_of(w, options, call_text("allgather", name), false, true, at); s != HVRUN_OK)
    return s;
  return guarded([&] {
    return hand_out(w, w->worker->allgather_async(
                           name, {input, static_cast<hvrun::DataType>(dtype), to_shape(ndim, shape),
                                  at.device, at.stream},
                           at.op_options()),
                    handle);
  });
}

hvrun_status_t hvrun_broadcast_submit(hvrun_worker_t* w, const char* name, void* inout,
                                      hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                      int root_rank, const hvrun_op_options_t* options,
                                      hvrun_handle_t** handle) {
  if (auto s = check_common(w, name, dtype, ndim, shape, handle); s != HVRUN_OK) return s;
  OpSettings at;
  if (auto s = settings_of(w, options, call_text("broadcast", name), false, true, at); s != HVRUN_OK)
    return s;
  return guarded([&] {
    hvrun::TensorView v{inout, static_cast<hvrun::DataType>(dtype), to_shape(ndim, shape),
                        at.device, at.stream};
    return hand_out(w, w->worker->broadcast_async(name, v, root_rank, at.op_options()), handle);
  });
}

hvrun_status_t hvrun_alltoall_submit(hvrun_worker_t* w, const char* name, const void* input,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     const int64_t* splits, const hvrun_op_options_t* options,
                                     hvrun_handle_t** handle) {
  if (auto s = check_common(w, name, dtype, ndim, shape, handle); s != HVRUN_OK) return s;
  OpSettings at;
  if (auto s = settings_of(w, options, call_text("alltoall", name), false, true, at); s != HVRUN_OK)
    return s;
  return guarded([&] {
    std::vector<int64_t> split_vec;
    if (splits) {
      auto members = set_size(w, at.set);
      if (!members.is_ok()) return record(members.status());
      split_vec.assign(splits, splits + *members);
    }
    return hand_out(w, w->worker->alltoall_async(
                           name, {input, static_cast<hvrun::DataType>(dtype), to_shape(ndim, shape),
                                  at.device, at.stream},
                           split_vec, at.op_options()),
                    handle);
  });
}

hvrun_status_t hvrun_reducescatter_submit(hvrun_worker_t* w, const char* name,
                                          const void* input, hvrun_dtype_t dtype, int ndim,
                                          const int64_t* shape, hvrun_reduce_op_t op,
                                          const hvrun_op_options_t* options,
                                          hvrun_handle_t** handle) {
  if (auto s = check_common(w, name, dtype, ndim, shape, handle); s != HVRUN_OK) return s;
  if (!hvrun::is_valid_reduce_op(op)) return bad("unknown reduce op " + std::to_string(op));
  OpSettings at;
  if (auto s = settings_of(w, options, call_text("reducescatter", name), true, true, at);
      s != HVRUN_OK)
    return s;
  return guarded([&] {
    return hand_out(w, w->worker->reducescatter_async(
                           name, {input, static_cast<hvrun::DataType>(dtype), to_shape(ndim, shape),
                                  at.device, at.stream},
                           at.reduce_options(op)),
                    handle);
  });
}

hvrun_status_t hvrun_barrier_submit(hvrun_worker_t* w, const hvrun_op_options_t* options,
                                    hvrun_handle_t** handle) {
  if (!w || !handle) return bad("null worker or handle pointer");
  OpSettings at;
  if (auto s = settings_of(w, options, "barrier", false, false, at); s != HVRUN_OK) return s;
  return guarded([&] { return hand_out(w, w->worker->barrier_async(at.op_options()), handle); });
}

hvrun_status_t hvrun_join_async(hvrun_worker_t* w, hvrun_handle_t** handle) {
  if (!w || !handle) return bad("null worker or handle pointer");
  if (w->is_view()) return bad("join is of the global process set: call it on the job's worker");
  return guarded([&] { return hand_out(w, w->worker->join_async(), handle); });
}

// The deprecated calls: hvrun_*_submit with their arguments as options.
hvrun_status_t hvrun_allreduce_async(hvrun_worker_t* w, const char* name, const void* input,
                                     void* output, hvrun_dtype_t dtype, int ndim,
                                     const int64_t* shape, hvrun_reduce_op_t op, double prescale,
                                     double postscale, hvrun_handle_t** handle) {
  hvrun_op_options_t o = options_on(nullptr);
  o.prescale = prescale;
  o.postscale = postscale;
  return hvrun_allreduce_submit(w, name, input, output, dtype, ndim, shape, op, &o, handle);
}

hvrun_status_t hvrun_allreduce_async_on_device(hvrun_worker_t* w, const char* name,
                                               const void* input, void* output,
                                               hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, hvrun_reduce_op_t op,
                                               double prescale, double postscale,
                                               const hvrun_device_t* device,
                                               hvrun_handle_t** handle) {
  hvrun_op_options_t o = options_on(device);
  o.prescale = prescale;
  o.postscale = postscale;
  return hvrun_allreduce_submit(w, name, input, output, dtype, ndim, shape, op, &o, handle);
}

hvrun_status_t hvrun_allgather_async(hvrun_worker_t* w, const char* name, const void* input,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     hvrun_handle_t** handle) {
  return hvrun_allgather_submit(w, name, input, dtype, ndim, shape, nullptr, handle);
}

hvrun_status_t hvrun_allgather_async_on_device(hvrun_worker_t* w, const char* name,
                                               const void* input, hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, const hvrun_device_t* device,
                                               hvrun_handle_t** handle) {
  const hvrun_op_options_t o = options_on(device);
  return hvrun_allgather_submit(w, name, input, dtype, ndim, shape, &o, handle);
}

hvrun_status_t hvrun_broadcast_async(hvrun_worker_t* w, const char* name, void* inout,
                                     hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                     int root_rank, hvrun_handle_t** handle) {
  return hvrun_broadcast_submit(w, name, inout, dtype, ndim, shape, root_rank, nullptr, handle);
}

hvrun_status_t hvrun_broadcast_async_on_device(hvrun_worker_t* w, const char* name, void* inout,
                                               hvrun_dtype_t dtype, int ndim,
                                               const int64_t* shape, int root_rank,
                                               const hvrun_device_t* device,
                                               hvrun_handle_t** handle) {
  const hvrun_op_options_t o = options_on(device);
  return hvrun_broadcast_submit(w, name, inout, dtype, ndim, shape, root_rank, &o, handle);
}

hvrun_status_t hvrun_alltoall_async(hvrun_worker_t* w, const char* name, const void* input,
                                    hvrun_dtype_t dtype, int ndim, const int64_t* shape,
                                    const int64_t* splits, hvrun_handle_t** handle) {
  return hvrun_alltoall_submit(w, name, input, dtype, ndim, shape, splits, nullptr, handle);
}

hvrun_status_t hvrun_alltoall_async_on_device(hvrun_worker_t* w, const char* name,
                                              const void* input, hvrun_dtype_t dtype, int ndim,
                                              const int64_t* shape, const int64_t* splits,
                                              const hvrun_device_t* device,
                                              hvrun_handle_t** handle) {
  const hvrun_op_options_t o = options_on(device);
  return hvrun_alltoall_submit(w, name, input, dtype, ndim, shape, splits, &o, handle);
}

hvrun_status_t hvrun_reducescatter_async(hvrun_worker_t* w, const char* name,
                                         const void* input, hvrun_dtype_t dtype, int ndim,
                                         const int64_t* shape, hvrun_reduce_op_t op,
                                         hvrun_handle_t** handle) {
  return hvrun_reducescatter_submit(w, name, input, dtype, ndim, shape, op, nullptr, handle);
}

hvrun_status_t hvrun_reducescatter_async_on_device(hvrun_worker_t* w, const char* name,
                                                   const void* input, hvrun_dtype_t dtype,
                                                   int ndim, const int64_t* shape,
                                                   hvrun_reduce_op_t op,
                                                   const hvrun_device_t* device,
                                                   hvrun_handle_t** handle) {
  const hvrun_op_options_t o = options_on(device);
  return hvrun_reducescatter_submit(w, name, input, dtype, ndim, shape, op, &o, handle);
}

hvrun_status_t hvrun_barrier_async(hvrun_worker_t* w, hvrun_handle_t** handle) {
  return hvrun_barrier_submit(w, nullptr, handle);
}


hvrun_status_t hvrun_add_process_set(hvrun_worker_t* w, const int* ranks, int count,
                                     int* process_set_id) {
  if (!w || !process_set_id || (count > 0 && !ranks)) return bad("null worker, ranks or id pointer");
  if (count < 0) return bad("negative rank count");
  return guarded([&] {
    auto set = w->worker->add_process_set(std::span<const int>(ranks, static_cast<size_t>(count)));
    if (!set.is_ok()) return record(set.status());
    *process_set_id = set->id;
    return record(hvrun::Status::ok());
  });
}

hvrun_status_t hvrun_remove_process_set(hvrun_worker_t* w, int process_set_id) {
  if (!w) return bad("null worker");
  return guarded([&] { return record(w->worker->remove_process_set({process_set_id})); });
}

hvrun_status_t hvrun_process_set_view(hvrun_worker_t* w, int process_set_id,
                                      hvrun_worker_t** view) {
  if (!w || !view) return bad("null worker or view pointer");
  *view = nullptr;
  return guarded([&] {
    auto ranks = w->worker->process_set_ranks({process_set_id});
    if (!ranks.is_ok()) return record(ranks.status());
    auto me = std::find(ranks->begin(), ranks->end(), w->worker->rank());
    if (me == ranks->end())
      return bad("rank " + std::to_string(w->worker->rank()) + " is not in process set " +
                 std::to_string(process_set_id) + "; only its members take a view of it");
    auto* made = new hvrun_worker;
    made->worker = w->worker;
    made->set = hvrun::ProcessSet{process_set_id};
    made->set_rank = static_cast<int>(me - ranks->begin());
    made->set_size = static_cast<int>(ranks->size());
    *view = made;
    return record(hvrun::Status::ok());
  });
}

int hvrun_handle_poll(const hvrun_handle_t* h) { return h && h->handle.poll() ? 1 : 0; }

hvrun_status_t hvrun_handle_wait(hvrun_handle_t* h, int64_t timeout_ms) {
  if (!h) return bad("null handle");
  if (timeout_ms < 0) return record(h->worker->wait(h->handle));
  return record(h->handle.wait(std::chrono::milliseconds(timeout_ms)));
}

hvrun_status_t hvrun_handle_status(hvrun_handle_t* h) {
  if (!h) return bad("null handle");
  return record(h->handle.status());
}

hvrun_status_t hvrun_handle_output(const hvrun_handle_t* h, const void** data, size_t* bytes,
                                   int* ndim, const int64_t** shape) {
  if (!h) return bad("null handle");
  hvrun::Status s = h->handle.status();
  if (!s.is_ok()) return record(s);
  hvrun::TensorView v = h->handle.output();
  auto* mutable_h = const_cast<hvrun_handle_t*>(h);
  std::call_once(mutable_h->output_once, [&] { mutable_h->output_shape = v.shape; });
  if (data) *data = v.data;
  if (bytes) *bytes = v.data ? v.bytes() : 0;
  if (ndim) *ndim = static_cast<int>(v.shape.size());
  if (shape) *shape = mutable_h->output_shape.data();
  return record(hvrun::Status::ok());
}

hvrun_status_t hvrun_handle_output_device(const hvrun_handle_t* h, hvrun_device_t* device) {
  if (!h || !device) return bad("null handle or device pointer");
  hvrun::Status s = h->handle.status();
  if (!s.is_ok()) return record(s);
  hvrun::TensorView v = h->handle.output();
  device->type = static_cast<hvrun_device_type_t>(static_cast<int>(v.device.type));
  device->index = v.device.index;
  device->stream = v.stream;
  return record(hvrun::Status::ok());
}

hvrun_status_t hvrun_set_device_allocator(hvrun_worker_t* w, hvrun_device_alloc_fn alloc,
                                          hvrun_device_release_fn release, void* user_data) {
  if (!w) return bad("null worker");
  if (alloc && !release) return bad("a device allocator needs a release function");
  return guarded([&] {
    if (!alloc) {
      w->worker->set_device_allocator({});
      return record(hvrun::Status::ok());
    }
    w->worker->set_device_allocator(
        [alloc, release, user_data](hvrun::Device d, size_t bytes, void* stream) -> std::shared_ptr<void> {
          void* p = alloc(user_data, d.index, bytes, stream);
          if (!p) return nullptr;
          const int index = d.index;
          return std::shared_ptr<void>(p, [release, user_data, index, stream](void* q) {
            release(user_data, index, q, stream);
          });
        });
    return record(hvrun::Status::ok());
  });
}

int hvrun_handle_join_result(const hvrun_handle_t* h) { return h ? h->handle.join_result() : -1; }

void hvrun_handle_free(hvrun_handle_t* h) { delete h; }

hvrun_status_t hvrun_checkpointer_create(hvrun_worker_t* w, hvrun_checkpointer_t** out) {
  if (!w || !out) return bad("null worker or checkpointer pointer");
  if (w->is_view()) return bad("checkpoints are the job's: create the checkpointer on its worker");
  return guarded([&] {
    auto options = hvrun::CheckpointOptions::from_environment();
    if (!options.is_ok()) return record(options.status());
    *out = new hvrun_checkpointer{hvrun::Checkpointer(*w->worker, *options)};
    return record(hvrun::Status::ok());
  });
}

void hvrun_checkpointer_free(hvrun_checkpointer_t* c) { delete c; }

int hvrun_checkpointer_enabled(const hvrun_checkpointer_t* c) {
  return c && c->checkpointer.enabled() ? 1 : 0;
}

hvrun_status_t hvrun_checkpointer_add(hvrun_checkpointer_t* c, const char* name, void* data,
                                      size_t bytes) {
  if (!c || !name) return bad("null checkpointer or name");
  return guarded([&] { return record(c->checkpointer.add(name, data, bytes)); });
}

hvrun_status_t hvrun_checkpointer_save(hvrun_checkpointer_t* c, int64_t step) {
  if (!c) return bad("null checkpointer");
  return guarded([&] { return record(c->checkpointer.save(step).status()); });
}

hvrun_status_t hvrun_checkpointer_save_if_due(hvrun_checkpointer_t* c, int64_t step, int* saved) {
  if (!c) return bad("null checkpointer");
  return guarded([&] {
    auto path = c->checkpointer.save_if_due(step);
    if (saved) *saved = path.is_ok() && !path->empty() ? 1 : 0;
    return record(path.status());
  });
}

hvrun_status_t hvrun_checkpointer_restore(hvrun_checkpointer_t* c, int64_t* step) {
  if (!c || !step) return bad("null checkpointer or step pointer");
  return guarded([&] {
    auto restored = c->checkpointer.restore();
    *step = restored.is_ok() && *restored ? **restored : -1;
    return record(restored.status());
  });
}

}  // extern "C"

hvrun_elastic_state_t* hvrun_elastic_state_new(void) { return new hvrun_elastic_state; }

void hvrun_elastic_state_free(hvrun_elastic_state_t* s) { delete s; }

hvrun_status_t hvrun_elastic_state_add(hvrun_elastic_state_t* s, const char* name, void* data,
                                       size_t bytes) {
  if (!s || !name) return bad("null elastic state or name");
  return guarded([&] { return record(s->state.add(name, data, bytes)); });
}

hvrun_status_t hvrun_elastic_commit(hvrun_elastic_state_t* s, hvrun_worker_t* w) {
  if (!s || !w) return bad("null elastic state or worker");
  if (w->is_view()) return bad("commit on the job's worker, not a process set's view");
  return guarded([&] { return record(s->state.commit(*w->worker)); });
}

hvrun_status_t hvrun_elastic_run(int abi_version, hvrun_elastic_state_t* s,
                                 hvrun_elastic_train_fn train, hvrun_elastic_reset_fn on_reset,
                                 void* user_data) {
  if (auto abi = check_abi(abi_version, "hvrun_elastic_run"); abi != HVRUN_OK) return abi;
  if (!s || !train) return bad("null elastic state or train function");
  return guarded([&] {
    if (on_reset) {
      s->state.on_reset([on_reset, user_data](hvrun::Worker& worker) {
        hvrun_worker borrowed;
        borrowed.worker = &worker;
        borrowed.borrowed = true;
        on_reset(&borrowed, user_data);
      });
    }
    const hvrun::Status status = hvrun::elastic::run(
        s->state, [&](hvrun::Worker& worker, hvrun::elastic::State&) -> hvrun::Status {
          hvrun_worker borrowed;
          borrowed.worker = &worker;
          borrowed.borrowed = true;
          const hvrun_status_t code = train(&borrowed, s, user_data);
          if (code == HVRUN_OK) return hvrun::Status::ok();
          return hvrun::Status(static_cast<hvrun::StatusCode>(static_cast<int>(code)),
                               t_last_error.empty() ? "the train function failed" : t_last_error);
        });
    return record(status);
  });
}

#include "hvrun/elastic.h"

#include <cstdlib>
#include <cstring>

namespace hvrun::elastic {

namespace {

// The same name and meaning as hvrun.elastic's (Python): a trainer mixing both agrees.
constexpr char kHostsUpdatedName[] = "hvrun.elastic.hosts_updated";

// Errors of the program itself: a reset would meet them again.
bool is_program_error(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status State::add(const std::string& name, void* data, size_t bytes) {
  if (name.empty()) return invalid_argument("elastic::State::add: the name is empty");
  if (data == nullptr && bytes > 0)
    return invalid_argument("elastic::State::add('" + name + "'): no memory given");
  for (const Buffer& b : buffers_)
    if (b.name == name)
      return already_exists("elastic::State::add: '" + name + "' was added already");
  Buffer buffer{name, data, bytes, {}};
  buffer.committed.resize(bytes);
  if (bytes > 0) std::memcpy(buffer.committed.data(), data, bytes);
  buffers_.push_back(std::move(buffer));
  return Status::ok();
}

void State::save() {
  for (Buffer& b : buffers_)
    if (b.bytes > 0) std::memcpy(b.committed.data(), b.data, b.bytes);
}

Status State::commit(Worker& worker) {
  save();
  hosts_updated_ = false;
  int32_t flag = worker.hosts_updated() ? 1 : 0;
  TensorView view{&flag, DataType::kInt32, {1}, {}, nullptr};
  AllreduceOptions max;
  max.op = ReduceOp::kMax;
  HVRUN_RETURN_IF_ERROR(worker.allreduce(kHostsUpdatedName, view, max));
  if (flag == 0) return Status::ok();
  hosts_updated_ = true;
  return unavailable("slots were added to the job: resetting to take them in");
}

void State::restore() {
  for (Buffer& b : buffers_)
    if (b.bytes > 0) std::memcpy(b.data, b.committed.data(), b.bytes);
}

Status State::sync(Worker& worker) {
  for (Buffer& b : buffers_) {
    if (b.bytes == 0) continue;
    TensorView view{b.data, DataType::kUInt8, {static_cast<int64_t>(b.bytes)}, {}, nullptr};
    HVRUN_RETURN_IF_ERROR(worker.broadcast("hvrun.elastic.state." + b.name, view, 0));
  }
  save();
  return Status::ok();
}

void State::on_reset(std::function<void(Worker&)> callback) {
  callbacks_.push_back(std::move(callback));
}

bool in_elastic_job() {
  const char* elastic = std::getenv("HVRUN_ELASTIC");
  return elastic != nullptr && std::string(elastic) == "1";
}

Status run(State& state, const std::function<Status(Worker&, State&)>& train,
           const Config* config) {
  auto init = [config] { return config ? Worker::init(*config) : Worker::init(); };
  HVRUN_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, init());
  const bool elastic = config ? config->elastic : in_elastic_job();
  for (;;) {
    Status status = state.sync(*worker);
    if (status.is_ok()) status = train(*worker, state);
    if (status.is_ok() || !elastic || is_program_error(status.code())) {
      Status down = worker->shutdown();
      return status.is_ok() ? down : status;
    }
    // A collective failed part-way (a lost rank): what this rank holds may be half-updated.
    // Added slots were agreed at a commit: the state is whole.
    if (!state.hosts_updated_) state.restore();
    state.hosts_updated_ = false;
    (void)worker->shutdown();  // the membership is gone: its errors tell nothing new
    worker.reset();
    // No new membership forming (the job failed, --elastic-timeout): the job is over.
    HVRUN_ASSIGN_OR_RETURN(worker, init());
    for (const auto& callback : state.callbacks_) callback(*worker);
  }
}

}  // namespace hvrun::elastic

#include "worker_lib/execution/cpu_executor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/logging.h"
#include "worker_lib/execution/response_shape.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {
namespace {

std::vector<int64_t> trailing_dims(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::vector<int64_t>{}
                       : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

// The shape this rank uses for entry i: its own, or the agreed one when it has none (joined).
std::vector<int64_t> local_shape(const v1::Response& r, const std::shared_ptr<PendingOp>& e,
                                 int i) {
  return e ? e->shape : shape_of(r.tensors(i));
}

}  // namespace

std::byte* CpuExecutor::reserve(std::vector<std::byte>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

int CpuExecutor::contributors(const v1::Response& r) const {
  return r.contributing_ranks() > 0 ? r.contributing_ranks() : size_;
}

Status CpuExecutor::execute(const v1::Response& response, const ResponseEntries& entries) {
  switch (response.op()) {
    case v1::COLLECTIVE_OP_ALLREDUCE: return allreduce(response, entries);
    case v1::COLLECTIVE_OP_REDUCESCATTER: return reducescatter(response, entries);
    case v1::COLLECTIVE_OP_ALLGATHER: return allgather(response, entries);
    case v1::COLLECTIVE_OP_BROADCAST: return broadcast(response, entries);
    case v1::COLLECTIVE_OP_ALLTOALL: return alltoall(response, entries);
    default:
      return internal_error("coordinator sent a response with unknown op " +
                            std::to_string(static_cast<int>(response.op())));
  }
}

Status CpuExecutor::fast_allreduce(const TensorAllreduce& call) {
  const auto start = telemetry::PhaseClock::now();
  Status status = backend_.allreduce_pieces({&call.tensor, 1}, call.dtype, call.op, call.scaling,
                                            fusion_, nullptr);
  if (phase_observer_)
    phase_observer_->on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, start,
                                        telemetry::PhaseClock::now(),
                                        call.tensor.count * dtype_size(call.dtype),
                                        /*on_gpu=*/false);
  return status;
}

// Fills pieces_ from the response: entry i's tensor, or (joined: no entry) a piece of the
// agreed size with no input (neutral data) and no output.
Status CpuExecutor::pieces_of(const v1::Response& r,
                               const ResponseEntries& e) {
  pieces_.clear();
  for (int i = 0; i < r.tensors_size(); ++i) {
    const auto n = static_cast<size_t>(elements_of(r.tensors(i)));
    if (!e[i]) {
      pieces_.push_back({nullptr, nullptr, n});
      continue;
    }
    if (static_cast<size_t>(num_elements(e[i]->shape)) != n)
      return internal_error("tensor '" + e[i]->name() + "': coordinator's shape does not match "
                            "this rank's (protocol error)");
    pieces_.push_back({e[i]->input, e[i]->output, n});
  }
  return Status::ok();
}

// One fused allreduce of pieces_ through the backend (allreduce_pieces: the shm backend reads
// and writes the tensors directly; the others pack into fusion_). Telemetry: the backend splits
// the call's time into pack / collective / unpack; shm interleaves them chunk by chunk, so its
// pack and unpack are sums of many short copies, reported here as one interval each, laid end
// to end within the call (durations exact, positions approximate).
Status CpuExecutor::reduce_pieces(const v1::Response& r) {
  const auto dtype = static_cast<DataType>(r.dtype());
  const auto op = static_cast<ReduceOp>(r.reduce_op());
  const ReduceScaling scaling{.prescale = r.prescale() == 0 ? 1.0 : r.prescale(),
                              .postscale = r.postscale() == 0 ? 1.0 : r.postscale(),
                              .divisor = op == ReduceOp::kAverage ? contributors(r) : 1};
  if (!phase_observer_) return backend_.allreduce_pieces(pieces_, dtype, op, scaling, fusion_, nullptr);
  // This rank's bytes (local_bytes) from the pieces, counted before the collective: the
  // entries it would read are cold by the end of a large one.
  size_t elements = 0;
  for (const ReducePiece& p : pieces_)
    if (p.input) elements += p.count;
  const uint64_t bytes = elements * dtype_size(dtype);
  PiecePhases phases;
  const auto start = telemetry::PhaseClock::now();
  Status status = backend_.allreduce_pieces(pieces_, dtype, op, scaling, fusion_, &phases);
  const auto end = telemetry::PhaseClock::now();
  const std::string_view name = size_ > 1 ? std::string_view(backend_name_) : "local";
  const auto pack_end = start + phases.pack;
  const auto unpack_start = std::max(pack_end, end - phases.unpack);
  if (phases.pack.count() > 0)
    phase_observer_->on_phase(r, telemetry::Phase::kPack, start, pack_end, bytes, name);
  phase_observer_->on_phase(r, telemetry::Phase::kCollective, pack_end, unpack_start, bytes, name);
  if (phases.unpack.count() > 0)
    phase_observer_->on_phase(r, telemetry::Phase::kUnpack, unpack_start, end, bytes, name);
  return status;
}

Status CpuExecutor::allreduce(const v1::Response& r,
                               const ResponseEntries& e) {
  HVRUN_RETURN_IF_ERROR(pieces_of(r, e));
  return reduce_pieces(r);
}

// Reduces every tensor whole (a reduce-scatter is an allreduce of which each rank keeps its
// rows), but only this rank's rows have an output: the backend copies nothing else out. Each
// tensor goes as one piece per rank's block of rows, on every rank alike (joined ranks too), so
// every rank passes the same piece counts.
Status CpuExecutor::reducescatter(const v1::Response& r,
                                   const ResponseEntries& e) {
  HVRUN_RETURN_IF_ERROR(pieces_of(r, e));
  const auto dtype = static_cast<DataType>(r.dtype());
  const size_t esize = dtype_size(dtype);
  std::vector<ReducePiece> whole;
  whole.swap(pieces_);
  pieces_.clear();
  for (int i = 0; i < r.tensors_size(); ++i) {
    const std::vector<int64_t> shape = e[i] ? e[i]->shape : shape_of(r.tensors(i));
    if (shape.empty())
      return invalid_argument("reducescatter '" + r.tensors(i).name() +
                              "' needs at least one dimension");
    const int64_t dim0 = shape[0];
    const auto row = static_cast<size_t>(trailing_elements(shape));
    const int64_t base = dim0 / size_, extra = dim0 % size_;
    const auto* in = static_cast<const std::byte*>(whole[static_cast<size_t>(i)].input);
    size_t first = 0;  // first element of rank k's block
    for (int k = 0; k < size_; ++k) {
      const auto count = static_cast<size_t>(base + (k < extra ? 1 : 0)) * row;
      void* output = nullptr;
      if (e[i] && k == rank_) {
        OwnedTensor& out = e[i]->handle->output;
        out.dtype = dtype;
        out.shape = shape;
        out.shape[0] = base + (k < extra ? 1 : 0);
        out.bytes.resize(count * esize);
        output = out.bytes.data();
      }
      pieces_.push_back({in ? in + first * esize : nullptr, output, count});
      first += count;
    }
  }
  return reduce_pieces(r);
}

Status CpuExecutor::allgather(const v1::Response& r,
                               const ResponseEntries& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  size_t esize = dtype_size(dtype);
  int count = r.tensors_size();
  std::vector<size_t> row_bytes(count);
  std::vector<size_t> per_rank(size_, 0);
  for (int i = 0; i < count; ++i) {
    const auto& t = r.tensors(i);
    if (t.first_dims_size() != size_)
      return internal_error("allgather '" + t.name() + "': response has " +
                            std::to_string(t.first_dims_size()) + " first_dims for " +
                            std::to_string(size_) + " ranks (protocol error)");
    row_bytes[i] = static_cast<size_t>(trailing_elements(local_shape(r, e[i], i))) * esize;
    for (int k = 0; k < size_; ++k) per_rank[k] += static_cast<size_t>(t.first_dims(k)) * row_bytes[i];
  }
  // This rank's tensors, back to back.
  std::byte* send = reserve(scratch_, per_rank[rank_]);
  telemetry::ScopedPhase pack(phase_observer_, r, telemetry::Phase::kPack, per_rank[rank_],
                              backend_name_);
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    size_t bytes = static_cast<size_t>(r.tensors(i).first_dims(rank_)) * row_bytes[i];
    if (e[i] && bytes) std::memcpy(send + at, e[i]->input, bytes);
    else if (bytes) std::memset(send + at, 0, bytes);
    at += bytes;
  }
  size_t total = std::accumulate(per_rank.begin(), per_rank.end(), size_t{0});
  std::byte* recv = reserve(fusion_, total);
  pack.finish();
  {
    telemetry::ScopedPhase collective(phase_observer_, r, telemetry::Phase::kCollective,
                                      per_rank[rank_], backend_name_);
    HVRUN_RETURN_IF_ERROR(backend_.allgatherv(send, recv, per_rank));
  }
  telemetry::ScopedPhase unpack(phase_observer_, r, telemetry::Phase::kUnpack, per_rank[rank_],
                                backend_name_);

  std::vector<size_t> rank_start(size_, 0);
  for (int k = 1; k < size_; ++k) rank_start[k] = rank_start[k - 1] + per_rank[k - 1];
  std::vector<size_t> within(size_, 0);  // offset of tensor i inside each rank's block
  for (int i = 0; i < count; ++i) {
    const auto& t = r.tensors(i);
    if (e[i]) {
      OwnedTensor& out = e[i]->handle->output;
      out.dtype = dtype;
      out.shape = {0};
      for (int64_t d : trailing_dims(e[i]->shape)) out.shape.push_back(d);
      for (int k = 0; k < size_; ++k) out.shape[0] += t.first_dims(k);
      out.bytes.resize(static_cast<size_t>(out.shape[0]) * row_bytes[i]);
      size_t pos = 0;
      for (int k = 0; k < size_; ++k) {
        size_t bytes = static_cast<size_t>(t.first_dims(k)) * row_bytes[i];
        if (bytes) std::memcpy(out.bytes.data() + pos, recv + rank_start[k] + within[k], bytes);
        pos += bytes;
      }
    }
    for (int k = 0; k < size_; ++k) within[k] += static_cast<size_t>(t.first_dims(k)) * row_bytes[i];
  }
  return Status::ok();
}

Status CpuExecutor::broadcast(const v1::Response& r,
                               const ResponseEntries& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const auto& entry = e.at(0);
  size_t bytes = static_cast<size_t>(num_elements(local_shape(r, entry, 0))) * dtype_size(dtype);
  void* buffer = entry ? entry->output : reserve(scratch_, bytes);
  if (entry && rank_ == r.root_rank() && entry->input != entry->output && bytes)
    std::memcpy(entry->output, entry->input, bytes);
  telemetry::ScopedPhase collective(phase_observer_, r, telemetry::Phase::kCollective, bytes,
                                    backend_name_);
  return backend_.broadcast(buffer, bytes, r.root_rank());
}

Status CpuExecutor::alltoall(const v1::Response& r,
                              const ResponseEntries& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const auto& entry = e.at(0);
  const auto& t = r.tensors(0);
  if (t.splits_matrix_size() != size_ * size_)
    return internal_error("alltoall '" + t.name() + "': splits_matrix has " +
                          std::to_string(t.splits_matrix_size()) + " entries, expected " +
                          std::to_string(size_ * size_) + " (protocol error)");
  std::vector<int64_t> shape = local_shape(r, entry, 0);
  size_t row = static_cast<size_t>(trailing_elements(shape)) * dtype_size(dtype);
  std::vector<size_t> send(size_), recv(size_);
  std::vector<int64_t> recv_rows(size_);
  int64_t total_rows = 0;
  for (int k = 0; k < size_; ++k) {
    send[k] = static_cast<size_t>(t.splits_matrix(rank_ * size_ + k)) * row;
    recv_rows[k] = t.splits_matrix(k * size_ + rank_);
    recv[k] = static_cast<size_t>(recv_rows[k]) * row;
    total_rows += recv_rows[k];
  }
  size_t send_total = std::accumulate(send.begin(), send.end(), size_t{0});
  const void* input = entry ? entry->input : reserve(scratch_, send_total);
  std::byte* output = reserve(fusion_, static_cast<size_t>(total_rows) * row);
  {
    telemetry::ScopedPhase collective(phase_observer_, r, telemetry::Phase::kCollective,
                                      send_total, backend_name_);
    HVRUN_RETURN_IF_ERROR(backend_.alltoallv(input, send, output, recv));
  }
  telemetry::ScopedPhase unpack(phase_observer_, r, telemetry::Phase::kUnpack, send_total,
                                backend_name_);
  if (entry) {
    OwnedTensor& out = entry->handle->output;
    out.dtype = dtype;
    out.shape = shape.empty() ? std::vector<int64_t>{0} : shape;
    out.shape[0] = total_rows;
    out.bytes.assign(output, output + static_cast<size_t>(total_rows) * row);
    entry->handle->received_splits = recv_rows;
  }
  return Status::ok();
}

}  // namespace hvrun::detail

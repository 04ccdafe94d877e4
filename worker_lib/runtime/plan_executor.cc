#include "worker_lib/runtime/plan_executor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/logging.h"
#include "worker_lib/runtime/reduction_math.h"
#include "worker_lib/runtime/response_shape.h"

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

std::byte* PlanExecutor::reserve(std::vector<std::byte>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

int PlanExecutor::contributors(const v1::Response& r) const {
  return r.contributing_ranks() > 0 ? r.contributing_ranks() : size_;
}

void PlanExecutor::execute(const v1::Response& response,
                           const std::vector<std::shared_ptr<PendingOp>>& entries) {
  Status status;
  const bool data_op = response.op() != v1::COLLECTIVE_OP_BARRIER &&
                       response.op() != v1::COLLECTIVE_OP_JOIN;
  if (response.device() == v1::DEVICE_KIND_CUDA && data_op) {
    status = execute_on_gpu(response, entries);
  } else {
    switch (response.op()) {
      case v1::COLLECTIVE_OP_ALLREDUCE: status = allreduce(response, entries); break;
      case v1::COLLECTIVE_OP_REDUCESCATTER: status = reducescatter(response, entries); break;
      case v1::COLLECTIVE_OP_ALLGATHER: status = allgather(response, entries); break;
      case v1::COLLECTIVE_OP_BROADCAST: status = broadcast(response, entries); break;
      case v1::COLLECTIVE_OP_ALLTOALL: status = alltoall(response, entries); break;
      case v1::COLLECTIVE_OP_BARRIER: status = Status::ok(); break;
      case v1::COLLECTIVE_OP_JOIN:
        for (const auto& e : entries)
          if (e) e->handle->join_result = response.last_joined_rank();
        break;
      default:
        status = internal_error("coordinator sent a response with unknown op " +
                                std::to_string(static_cast<int>(response.op())));
    }
  }
  if (!status.is_ok() && explain_) status = explain_(std::move(status));
  if (!status.is_ok()) SPDLOG_ERROR("{}", status.message());
  for (const auto& e : entries)
    if (e) e->handle->complete(status);
}

Status PlanExecutor::execute_on_gpu(const v1::Response& r,
                                    const std::vector<std::shared_ptr<PendingOp>>& e) {
  if (!gpu_)
    return failed_precondition("response on CUDA tensors but this worker has no GPU data plane "
                               "(PlanExecutor::enable_gpu was not called)");
  return gpu_->execute(r, e);
}

Status PlanExecutor::reduce_into_fusion(const v1::Response& r,
                                        const std::vector<std::shared_ptr<PendingOp>>& e,
                                        std::vector<size_t>& offsets) {
  auto dtype = static_cast<DataType>(r.dtype());
  auto op = static_cast<ReduceOp>(r.reduce_op());
  DataType work = work_dtype(dtype);
  size_t wsize = dtype_size(work);
  double prescale = r.prescale() == 0 ? 1.0 : r.prescale();

  size_t total = 0;
  offsets.clear();
  for (int i = 0; i < r.tensors_size(); ++i) {
    offsets.push_back(total);
    total += static_cast<size_t>(num_elements(shape_of(r.tensors(i))));
  }
  std::byte* buf = reserve(fusion_, total * wsize);
  for (int i = 0; i < r.tensors_size(); ++i) {
    size_t n = static_cast<size_t>(num_elements(shape_of(r.tensors(i))));
    std::byte* dst = buf + offsets[i] * wsize;
    if (e[i]) {
      if (static_cast<size_t>(num_elements(e[i]->shape)) != n)
        return internal_error("tensor '" + e[i]->name() + "': coordinator's shape does not match "
                              "this rank's (protocol error)");
      pack_scaled(dst, e[i]->input, n, dtype, prescale);
    } else {
      fill_neutral(dst, n, dtype, op);
    }
  }
  ReduceOp wire_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  if (size_ > 1 && total > 0) {
    HVRUN_RETURN_IF_ERROR(backend_.allreduce(buf, total, work, wire_op));
  }
  return Status::ok();
}

Status PlanExecutor::allreduce(const v1::Response& r,
                               const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  if (r.tensors_size() == 1 && e[0] && work_dtype(dtype) == dtype) {
    return allreduce_in_output(r, *e[0]);
  }
  std::vector<size_t> offsets;
  HVRUN_RETURN_IF_ERROR(reduce_into_fusion(r, e, offsets));
  size_t wsize = dtype_size(work_dtype(dtype));
  double postscale = r.postscale() == 0 ? 1.0 : r.postscale();
  for (int i = 0; i < r.tensors_size(); ++i) {
    if (!e[i]) continue;
    size_t n = static_cast<size_t>(num_elements(e[i]->shape));
    unpack_scaled(e[i]->output, fusion_.data() + offsets[i] * wsize, n, dtype,
                  static_cast<ReduceOp>(r.reduce_op()), contributors(r), postscale);
  }
  return Status::ok();
}

// A lone tensor of a native type needs no fusion buffer: reduce it where the result goes.
Status PlanExecutor::allreduce_in_output(const v1::Response& r, PendingOp& entry) {
  auto dtype = static_cast<DataType>(r.dtype());
  auto op = static_cast<ReduceOp>(r.reduce_op());
  size_t n = static_cast<size_t>(num_elements(entry.shape));
  if (static_cast<int64_t>(n) != num_elements(shape_of(r.tensors(0))))
    return internal_error("tensor '" + entry.name() + "': coordinator's shape does not match "
                          "this rank's (protocol error)");
  double prescale = r.prescale() == 0 ? 1.0 : r.prescale();
  double postscale = r.postscale() == 0 ? 1.0 : r.postscale();
  if (n == 0) return Status::ok();
  if (entry.input != entry.output || prescale != 1.0)
    pack_scaled(entry.output, entry.input, n, dtype, prescale);
  if (size_ > 1) {
    HVRUN_RETURN_IF_ERROR(backend_.allreduce(entry.output, n, dtype,
                                             op == ReduceOp::kAverage ? ReduceOp::kSum : op));
  }
  unpack_scaled(entry.output, entry.output, n, dtype, op, contributors(r), postscale);
  return Status::ok();
}

Status PlanExecutor::reducescatter(const v1::Response& r,
                                   const std::vector<std::shared_ptr<PendingOp>>& e) {
  std::vector<size_t> offsets;
  HVRUN_RETURN_IF_ERROR(reduce_into_fusion(r, e, offsets));
  auto dtype = static_cast<DataType>(r.dtype());
  size_t wsize = dtype_size(work_dtype(dtype));
  double postscale = r.postscale() == 0 ? 1.0 : r.postscale();
  for (int i = 0; i < r.tensors_size(); ++i) {
    if (!e[i]) continue;
    const std::vector<int64_t>& shape = e[i]->shape;
    int64_t dim0 = shape.at(0);
    int64_t row = trailing_elements(shape);
    int64_t base = dim0 / size_, extra = dim0 % size_;
    int64_t rows = base + (rank_ < extra ? 1 : 0);
    int64_t first_row = rank_ * base + std::min<int64_t>(rank_, extra);
    OwnedTensor& out = e[i]->handle->output;
    out.dtype = dtype;
    out.shape = shape;
    out.shape[0] = rows;
    out.bytes.resize(static_cast<size_t>(rows * row) * dtype_size(dtype));
    unpack_scaled(out.bytes.data(), fusion_.data() + (offsets[i] + first_row * row) * wsize,
                  static_cast<size_t>(rows * row), dtype, static_cast<ReduceOp>(r.reduce_op()),
                  contributors(r), postscale);
  }
  return Status::ok();
}

Status PlanExecutor::allgather(const v1::Response& r,
                               const std::vector<std::shared_ptr<PendingOp>>& e) {
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
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    size_t bytes = static_cast<size_t>(r.tensors(i).first_dims(rank_)) * row_bytes[i];
    if (e[i] && bytes) std::memcpy(send + at, e[i]->input, bytes);
    else if (bytes) std::memset(send + at, 0, bytes);
    at += bytes;
  }
  size_t total = std::accumulate(per_rank.begin(), per_rank.end(), size_t{0});
  std::byte* recv = reserve(fusion_, total);
  HVRUN_RETURN_IF_ERROR(backend_.allgatherv(send, recv, per_rank));

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

Status PlanExecutor::broadcast(const v1::Response& r,
                               const std::vector<std::shared_ptr<PendingOp>>& e) {
  auto dtype = static_cast<DataType>(r.dtype());
  const auto& entry = e.at(0);
  size_t bytes = static_cast<size_t>(num_elements(local_shape(r, entry, 0))) * dtype_size(dtype);
  void* buffer = entry ? entry->output : reserve(scratch_, bytes);
  if (entry && rank_ == r.root_rank() && entry->input != entry->output && bytes)
    std::memcpy(entry->output, entry->input, bytes);
  return backend_.broadcast(buffer, bytes, r.root_rank());
}

Status PlanExecutor::alltoall(const v1::Response& r,
                              const std::vector<std::shared_ptr<PendingOp>>& e) {
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
  HVRUN_RETURN_IF_ERROR(backend_.alltoallv(input, send, output, recv));
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

// One rank of the host plane's jobs (host_plane_jobs_test.cc), run under hvrun with
// --device-plane host: CUDA tensors whose data is host memory, so the GPU executor runs its own
// code with the host plane (backends/nccl/host_plane/) in place of CUDA and NCCL.
//
//   hvrun -np N --device-plane host hvrun_host_plane_worker collectives
//       every collective and dtype on "CUDA" tensors against the same on CPU tensors
//   ... join       the last rank joins at once; the others' reductions get its neutral values
//   ... abort      a collective held behind the last rank's stream fails on every rank with
//                  kAborted naming the reason, promptly, when rank 0 aborts the job
//   ... timeout    (with --op-timeout 3) the same collective fails at the op timeout
//   ... elastic    an elastic trainer on CUDA tensors; the rank ELASTIC_KILL_RANK SIGKILLs
//                  itself at step ELASTIC_KILL_AT and the survivors shrink the communicator;
//                  with ELASTIC_GROW=FILE:STEP:TEXT rank 0 writes TEXT (the discovery script's
//                  input) into FILE at STEP, and the job steps on until a rank has joined
//   ... steady     a training step's asynchronous allreduces of the same CUDA tensors, step
//                  after step, then a changed set (a new shape, a new name): every step's
//                  results against the CPU path's (hvrun's telemetry summary counts the
//                  collectives run without the coordinator)
//
// Prints "PASS ..." / "FAIL ..." lines and a summary; exits non-zero on any failure.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/elastic.h"
#include "hvrun/hvrun.h"
#include "worker_lib/backends/nccl/host_plane/host_stream.h"
#include "worker_lib/half.h"

namespace {

using Clock = std::chrono::steady_clock;
using hvrun::DataType;
using hvrun::Device;
using hvrun::ReduceOp;
using hvrun::detail::cuda::HostStream;

int failures = 0;
int checks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("FAIL %s\n", what.c_str());
  }
}

// A tensor's bytes with element access as double, for every dtype.
struct Buffer {
  DataType dtype;
  std::vector<std::byte> bytes;
  Buffer(DataType t, size_t n) : dtype(t), bytes(std::max<size_t>(n, 1) * hvrun::dtype_size(t)) {}
  size_t size() const { return bytes.size() / hvrun::dtype_size(dtype); }
  void* data() { return bytes.data(); }
  template <typename T> T& at(size_t i) { return reinterpret_cast<T*>(bytes.data())[i]; }
  void set(size_t i, double v) {
    using namespace hvrun::detail;
    switch (dtype) {
      case DataType::kUInt8: at<uint8_t>(i) = static_cast<uint8_t>(v); break;
      case DataType::kInt8: at<int8_t>(i) = static_cast<int8_t>(v); break;
      case DataType::kInt16: at<int16_t>(i) = static_cast<int16_t>(v); break;
      case DataType::kInt32: at<int32_t>(i) = static_cast<int32_t>(v); break;
      case DataType::kInt64: at<int64_t>(i) = static_cast<int64_t>(v); break;
      case DataType::kFloat16: at<uint16_t>(i) = float_to_float16(static_cast<float>(v)); break;
      case DataType::kBFloat16: at<uint16_t>(i) = float_to_bfloat16(static_cast<float>(v)); break;
      case DataType::kFloat32: at<float>(i) = static_cast<float>(v); break;
      case DataType::kFloat64: at<double>(i) = v; break;
    }
  }
};

double get(const void* data, DataType t, size_t i) {
  using namespace hvrun::detail;
  switch (t) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(data)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kFloat16: return float16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kFloat32: return static_cast<const float*>(data)[i];
    case DataType::kFloat64: return static_cast<const double*>(data)[i];
  }
  return 0;
}

bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Integer results match the CPU's bit for bit; floating ones within a rounding of their type
// (ncclAvg rounds the sum before dividing, the CPU path divides the wider sum).
double tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat16: return 2e-3;
    case DataType::kBFloat16: return 1.6e-2;
    case DataType::kFloat32: return 1e-6;
    case DataType::kFloat64: return 1e-12;
    default: return 0;
  }
}

// Compares `count` elements of the device result with the CPU result; "" when equal.
std::string differ(const void* dev, const void* cpu, DataType t, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    double a = get(dev, t, i), b = get(cpu, t, i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (std::fabs(a - b) <= tolerance(t) * std::max(1.0, std::fabs(b))) continue;
    return "element " + std::to_string(i) + ": device " + std::to_string(a) + ", cpu " + std::to_string(b);
  }
  return "";
}

// Small values every dtype holds (products of a few ranks stay in range; halves exactly).
Buffer values(DataType t, size_t n, int rank, int salt) {
  Buffer b(t, n);
  const bool is_unsigned = t == DataType::kUInt8;
  for (size_t i = 0; i < n; ++i) {
    int v = static_cast<int>((static_cast<size_t>(rank + 1) * 7 + i * 3 + static_cast<size_t>(salt)) % 5);
    double x = is_unsigned ? v + 1 : v - 2;
    if (x == 0) x = 1;
    b.set(i, is_float(t) ? x / 4 : x);
  }
  return b;
}

hvrun::TensorView on(Device d, Buffer& b, std::vector<int64_t> shape, void* stream = nullptr) {
  return hvrun::TensorView{b.data(), b.dtype, std::move(shape), d, d.is_cuda() ? stream : nullptr};
}

const Device kDev = Device::cuda(0);
const Device kCpu = Device::cpu();

size_t elements(const hvrun::OwnedTensor& t) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  return n;
}

std::string dtype_text(DataType t) { return std::string(hvrun::dtype_name(t)); }
std::string op_text(ReduceOp op) { return std::string(hvrun::reduce_op_name(op)); }

// Lone allreduces of every op, in place, straight input-to-output and through the fusion buffer
// (prescale), and one that needs several rounds of the communicator's slots.
void allreduces(hvrun::Worker& w, DataType t) {
  std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct,
                            ReduceOp::kAverage};
  for (ReduceOp op : ops) {
    for (double prescale : {1.0, 0.5}) {
      if (prescale != 1.0 && !is_float(t)) continue;
      const size_t n = 1001;
      std::string name = "allreduce." + dtype_text(t) + "." + op_text(op) + (prescale != 1.0 ? ".pre" : "");
      hvrun::AllreduceOptions options{.op = op, .prescale = prescale, .postscale = prescale != 1.0 ? 3.0 : 1.0};
      Buffer dev = values(t, n, w.rank(), 1), cpu = values(t, n, w.rank(), 1);
      hvrun::Status a = w.allreduce("dev." + name, on(kDev, dev, {static_cast<int64_t>(n)}), options);
      hvrun::Status b = w.allreduce("cpu." + name, on(kCpu, cpu, {static_cast<int64_t>(n)}), options);
      expect(a.is_ok() && b.is_ok(), name + ": " + a.to_string() + " / " + b.to_string());
      std::string d = differ(dev.data(), cpu.data(), t, n);
      expect(d.empty(), name + ": " + d);
    }
  }
  // Out of place, larger than one slot of the communicator (several exchange rounds).
  const size_t big = (size_t{600} << 10) / hvrun::dtype_size(t) + 3;
  Buffer in = values(t, big, w.rank(), 2), dev(t, big), cpu(t, big);
  hvrun::Status a = w.allreduce("dev.big." + dtype_text(t), on(kDev, in, {static_cast<int64_t>(big)}),
                                on(kDev, dev, {static_cast<int64_t>(big)}));
  hvrun::Status b = w.allreduce("cpu.big." + dtype_text(t), on(kCpu, in, {static_cast<int64_t>(big)}),
                                on(kCpu, cpu, {static_cast<int64_t>(big)}));
  expect(a.is_ok() && b.is_ok(), "big allreduce " + dtype_text(t) + ": " + a.to_string() + " / " + b.to_string());
  std::string d = differ(dev.data(), cpu.data(), t, big);
  expect(d.empty(), "big allreduce " + dtype_text(t) + ": " + d);
}

// Several tensors submitted together: fused into one response (one pack, one collective, one
// unpack), on a caller's stream.
void fused(hvrun::Worker& w, DataType t, HostStream& stream) {
  const std::vector<int64_t> sizes{1, 3, 17, 1000, 4097};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
    const double pre = is_float(t) ? 2.0 : 1.0, post = is_float(t) ? 0.5 : 1.0;
    hvrun::AllreduceOptions options{.op = op, .prescale = pre, .postscale = post};
    std::vector<Buffer> dev, cpu;
    for (size_t i = 0; i < sizes.size(); ++i) {
      dev.push_back(values(t, static_cast<size_t>(sizes[i]), w.rank(), static_cast<int>(i)));
      cpu.push_back(values(t, static_cast<size_t>(sizes[i]), w.rank(), static_cast<int>(i)));
    }
    std::string base = "fused." + dtype_text(t) + "." + op_text(op);
    std::vector<hvrun::Handle> handles;
    for (size_t i = 0; i < sizes.size(); ++i)
      handles.push_back(w.allreduce_async("dev." + base + "." + std::to_string(i),
                                          on(kDev, dev[i], {sizes[i]}, &stream), options));
    for (size_t i = 0; i < sizes.size(); ++i)
      handles.push_back(w.allreduce_async("cpu." + base + "." + std::to_string(i),
                                          on(kCpu, cpu[i], {sizes[i]}), options));
    bool ok = true;
    std::string why;
    for (auto& h : handles) {
      hvrun::Status s = w.wait(h);
      if (!s.is_ok()) why = s.to_string();
      ok = ok && s.is_ok();
    }
    for (size_t i = 0; i < sizes.size() && ok; ++i) {
      why = differ(dev[i].data(), cpu[i].data(), t, static_cast<size_t>(sizes[i]));
      ok = why.empty();
    }
    expect(ok, base + ": " + why);
  }
}

void reducescatter(hvrun::Worker& w, DataType t) {
  const int64_t rows = 2 * w.size() + 1, row = 3;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    std::string name = "reducescatter." + dtype_text(t) + "." + op_text(op);
    Buffer in = values(t, static_cast<size_t>(rows * row), w.rank(), 3);
    auto a = w.reducescatter("dev." + name, on(kDev, in, {rows, row}), {.op = op});
    auto b = w.reducescatter("cpu." + name, on(kCpu, in, {rows, row}), {.op = op});
    expect(a.is_ok() && b.is_ok(), name + ": " + (a.is_ok() ? "" : a.status().to_string()) +
                                       (b.is_ok() ? "" : b.status().to_string()));
    if (!a.is_ok() || !b.is_ok()) continue;
    expect(a->shape == b->shape && a->device.is_cuda(), name + ": shapes or device differ");
    std::string d = differ(a->data(), b->data(), t, elements(*b));
    expect(d.empty(), name + ": " + d);
  }
}

// Moves without reduction, every dtype (int16 too): uneven allgather, broadcast, alltoall.
void movers(hvrun::Worker& w, DataType t, HostStream& stream) {
  const int rank = w.rank(), size = w.size();
  {  // Allgather: rank r has r + 1 rows; and an even one of two tensors fused.
    Buffer in = values(t, static_cast<size_t>((rank + 1) * 3), rank, 4);
    auto a = w.allgather("dev.allgather." + dtype_text(t), on(kDev, in, {rank + 1, 3}));
    auto b = w.allgather("cpu.allgather." + dtype_text(t), on(kCpu, in, {rank + 1, 3}));
    expect(a.is_ok() && b.is_ok() && a->shape == b->shape, "allgather uneven " + dtype_text(t));
    if (a.is_ok() && b.is_ok())
      expect(differ(a->data(), b->data(), t, elements(*b)).empty(),
             "allgather uneven " + dtype_text(t) + " values");
    Buffer x = values(t, 8, rank, 5), y = values(t, 5, rank, 6);
    auto h1 = w.allgather_async("dev.allgather2.x." + dtype_text(t), on(kDev, x, {4, 2}, &stream));
    auto h2 = w.allgather_async("dev.allgather2.y." + dtype_text(t), on(kDev, y, {5}, &stream));
    auto c1 = w.allgather("cpu.allgather2.x." + dtype_text(t), on(kCpu, x, {4, 2}));
    auto c2 = w.allgather("cpu.allgather2.y." + dtype_text(t), on(kCpu, y, {5}));
    bool ok = w.wait(h1).is_ok() && w.wait(h2).is_ok() && c1.is_ok() && c2.is_ok();
    if (ok) {
      hvrun::OwnedTensor o1 = h1.output_tensor(), o2 = h2.output_tensor();
      ok = differ(o1.data(), c1->data(), t, 8 * static_cast<size_t>(size)).empty() &&
           differ(o2.data(), c2->data(), t, 5 * static_cast<size_t>(size)).empty();
    }
    expect(ok, "allgather of two fused tensors " + dtype_text(t));
  }
  {  // Broadcast from the last rank.
    Buffer dev = values(t, 300, rank, 7), cpu = values(t, 300, rank, 7);
    hvrun::Status a = w.broadcast("dev.broadcast." + dtype_text(t), on(kDev, dev, {300}), size - 1);
    hvrun::Status b = w.broadcast("cpu.broadcast." + dtype_text(t), on(kCpu, cpu, {300}), size - 1);
    expect(a.is_ok() && b.is_ok() && differ(dev.data(), cpu.data(), t, 300).empty(),
           "broadcast " + dtype_text(t) + " " + a.to_string());
  }
  {  // Alltoall: (rank + r) % 3 rows of 2 to rank r.
    std::vector<int64_t> splits;
    int64_t rows = 0;
    for (int r = 0; r < size; ++r) {
      splits.push_back((rank + r) % 3);
      rows += splits.back();
    }
    Buffer in = values(t, static_cast<size_t>(std::max<int64_t>(rows, 1) * 2), rank, 8);
    auto a = w.alltoall("dev.alltoall." + dtype_text(t), on(kDev, in, {rows, 2}), splits);
    auto b = w.alltoall("cpu.alltoall." + dtype_text(t), on(kCpu, in, {rows, 2}), splits);
    expect(a.is_ok() && b.is_ok() && a->shape == b->shape, "alltoall " + dtype_text(t));
    if (a.is_ok() && b.is_ok())
      expect(differ(a->data(), b->data(), t, elements(*b)).empty(),
             "alltoall " + dtype_text(t) + " values");
  }
}

int collectives(hvrun::Worker& w) {
  HostStream stream("caller");
  const std::vector<DataType> reducible{DataType::kUInt8, DataType::kInt8, DataType::kInt32,
                                        DataType::kInt64, DataType::kFloat16, DataType::kBFloat16,
                                        DataType::kFloat32, DataType::kFloat64};
  for (DataType t : reducible) {
    allreduces(w, t);
    fused(w, t, stream);
    reducescatter(w, t);
    movers(w, t, stream);
  }
  movers(w, DataType::kInt16, stream);
  std::printf("host plane collectives: %s (%d checks, %d failed)\n", failures ? "FAILED" : "OK", checks, failures);
  return failures ? 1 : 0;
}

// The last rank joins at once; every reduction of the others gets its neutral value.
int join(hvrun::Worker& w) {
  const int last = w.size() - 1;
  if (w.rank() != last) {
    for (DataType t : {DataType::kFloat32, DataType::kInt32, DataType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kAverage}) {
        std::string name = "join." + dtype_text(t) + "." + op_text(op);
        Buffer dev = values(t, 257, w.rank(), 9), cpu = values(t, 257, w.rank(), 9);
        hvrun::Status a = w.allreduce("dev." + name, on(kDev, dev, {257}), {.op = op});
        hvrun::Status b = w.allreduce("cpu." + name, on(kCpu, cpu, {257}), {.op = op});
        std::string d = differ(dev.data(), cpu.data(), t, 257);
        expect(a.is_ok() && b.is_ok() && d.empty(), name + ": " + a.to_string() + " " + d);
        if (op == ReduceOp::kSum) {  // and what it must be: the contributing ranks' sum alone
          double want = 0, got = get(dev.data(), t, 5);
          for (int r = 0; r < last; ++r) want += get(values(t, 257, r, 9).data(), t, 5);
          expect(std::fabs(got - want) < 1e-3, name + ": element 5 is " + std::to_string(got) +
                                                   ", the contributors' sum " + std::to_string(want));
        }
      }
    }
  }
  auto joined = w.join();
  expect(joined.is_ok(), "join: " + (joined.is_ok() ? std::string() : joined.status().to_string()));
  std::printf("host plane join: %s (%d checks, %d failed)\n", failures ? "FAILED" : "OK", checks, failures);
  return failures ? 1 : 0;
}

// A collective held behind the last rank's stream (a caller's stream whose work never ends
// until released) fails on every rank: by rank 0's abort (by_timeout false) or at the op
// timeout (run with --op-timeout 3).
int stuck_collective(hvrun::Worker& w, bool by_timeout) {
  const bool held = w.rank() == w.size() - 1;
  HostStream stream("caller");
  Buffer x = values(DataType::kFloat32, 1024, w.rank(), 0);
  expect(w.allreduce("warmup", on(kDev, x, {1024})).is_ok(), "warm-up allreduce");
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  if (held)
    stream.enqueue([&] {
      // The safety valve: should the failure wait for this stream, it is released after 20 s
      // (the bound below then fails with the measured time instead of hanging).
      std::unique_lock<std::mutex> lock(m);
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
    });
  hvrun::Handle h = w.allreduce_async("stuck", on(kDev, x, {1024}, held ? &stream : nullptr));
  hvrun::Status early = h.wait(std::chrono::milliseconds(500));
  // Rank 0 aborts after its own wait: a rank that started waiting later may hear of it first.
  const bool abort_came = !by_timeout && w.rank() != 0 && early.code() == hvrun::StatusCode::kAborted;
  expect(early.code() == hvrun::StatusCode::kDeadlineExceeded || abort_came,
         "collective waits behind the held stream: " + early.to_string());
  const auto start = Clock::now();
  if (!by_timeout && w.rank() == 0) w.abort("host plane abort test");
  hvrun::Status st = abort_came ? early : h.wait(std::chrono::seconds(25));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  if (by_timeout) {
    // The first rank to time out aborts its communicator; a peer may hear of that first.
    bool named = st.message().find("op timeout") != std::string::npos ||
                 st.message().find("aborted its communicator") != std::string::npos;
    expect(!st.is_ok() && named, "stuck collective fails at the op timeout: " + st.to_string());
    if (st.message().find("op timeout") != std::string::npos) std::printf("rank %d: op timeout named\n", w.rank());
  } else {
    expect(st.code() == hvrun::StatusCode::kAborted && st.message().find("host plane abort test") != std::string::npos,
           "aborted collective fails with kAborted naming the reason: " + st.to_string());
  }
  const long long bound_ms = by_timeout ? 9000 : 6000;  // the op timeout (3 s) counts here
  expect(ms < bound_ms, std::string(by_timeout ? "timeout" : "abort") + " took " + std::to_string(ms) +
                            " ms (bound " + std::to_string(bound_ms) + ")");
  std::printf("%s path: %s in %lld ms\n", by_timeout ? "timeout" : "abort", failures == 0 ? "OK" : "FAILED",
              static_cast<long long>(ms));
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// ELASTIC_GROW: which file to write what into, at which step; `to`: the slots TEXT lists
// ("localhost:3": one host).
struct Growth {
  std::string file, text;
  int64_t at = -1;
  int to = 0;
  bool wanted() const { return at >= 0; }
};

Growth growth_from_env() {
  Growth g;
  const char* v = std::getenv("ELASTIC_GROW");
  if (v == nullptr) return g;
  std::string spec(v);
  size_t first = spec.find(':'), second = spec.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) return g;
  g.file = spec.substr(0, first);
  g.at = std::atoll(spec.substr(first + 1, second - first - 1).c_str());
  g.text = spec.substr(second + 1) + "\n";
  g.to = std::atoi(spec.substr(spec.rfind(':') + 1).c_str());
  return g;
}

// elastic_cpp_job.cc's arithmetic on a CUDA tensor: every step adds the job's size to `total`
// through the allreduce, and to `expected` by the rank's own count, so that the two agree after
// any reset only if every collective on the rebuilt communicator was right.
// One tensor of the steady state's step: its name, shape and reduction.
struct StepTensor {
  std::string name;
  int64_t count;
  DataType dtype;
  ReduceOp op;
};

// The inputs of step `step`: they change every step, so a result left from an earlier step
// cannot pass for this one's.
Buffer step_input(const StepTensor& t, int rank, int step) {
  return values(t.dtype, static_cast<size_t>(t.count), rank, step * 7 + static_cast<int>(t.count % 5));
}

// The CPU path's result of `step`'s tensors: the same inputs as one grouped allreduce per
// reduction (a group always goes through the coordinator, so the reference adds nothing to the
// count of collectives run without it).
std::vector<Buffer> cpu_reference(hvrun::Worker& w, const std::vector<StepTensor>& set, int step) {
  std::vector<Buffer> cpu;
  for (const StepTensor& t : set) cpu.push_back(step_input(t, w.rank(), step));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    std::vector<std::string> names;
    std::vector<hvrun::TensorView> views;
    for (size_t i = 0; i < set.size(); ++i) {
      if (set[i].op != op) continue;
      names.push_back("reference." + set[i].name);
      views.push_back(on(kCpu, cpu[i], {set[i].count}));
    }
    for (hvrun::Handle& h : w.grouped_allreduce_async(names, views, {.op = op}))
      expect(w.wait(h).is_ok(), "CPU reference of step " + std::to_string(step));
  }
  return cpu;
}

// `steps` steps of `set`, submitted asynchronously on a caller's stream and waited for as a
// training step does; every step checked against the CPU path.
void steady_steps(hvrun::Worker& w, const std::vector<StepTensor>& set, int first, int steps,
                  HostStream& stream) {
  for (int step = first; step < first + steps; ++step) {
    std::vector<Buffer> dev;
    for (const StepTensor& t : set) dev.push_back(step_input(t, w.rank(), step));
    std::vector<hvrun::Handle> handles;
    for (size_t i = 0; i < set.size(); ++i)
      handles.push_back(w.allreduce_async("steady." + set[i].name,
                                          on(kDev, dev[i], {set[i].count}, &stream),
                                          {.op = set[i].op}));
    bool ok = true;
    for (hvrun::Handle& h : handles) {
      hvrun::Status s = w.wait(h);
      expect(s.is_ok(), "steady step " + std::to_string(step) + ": " + s.to_string());
      ok = ok && s.is_ok();
    }
    if (!ok) return;
    std::vector<Buffer> cpu = cpu_reference(w, set, step);
    for (size_t i = 0; i < set.size(); ++i) {
      std::string d = differ(dev[i].data(), cpu[i].data(), set[i].dtype, static_cast<size_t>(set[i].count));
      expect(d.empty(), "steady step " + std::to_string(step) + " '" + set[i].name + "': " + d);
    }
  }
}

int steady(hvrun::Worker& w) {
  HostStream stream("caller");
  // Two fused responses a step (float32 sums, float64 averages), as a model's gradients.
  std::vector<StepTensor> set{{"f32.0", 1, DataType::kFloat32, ReduceOp::kSum},
                              {"f32.1", 17, DataType::kFloat32, ReduceOp::kSum},
                              {"f32.2", 1000, DataType::kFloat32, ReduceOp::kSum},
                              {"f32.3", 4097, DataType::kFloat32, ReduceOp::kSum},
                              {"f64.0", 5, DataType::kFloat64, ReduceOp::kAverage},
                              {"f64.1", 300, DataType::kFloat64, ReduceOp::kAverage}};
  const int steps = env_int("STEADY_STEPS", 20);
  steady_steps(w, set, 0, steps, stream);
  // The set changes: one tensor another shape, one name new. Their first step must go through
  // the coordinator (a round would run the cached shape), the steps after run by agreement.
  set[2].count = 1001;
  set.push_back({"f64.new", 7, DataType::kFloat64, ReduceOp::kAverage});
  steady_steps(w, set, steps, steps, stream);
  std::printf("host plane steady: %s (%d checks, %d failed)\n", failures ? "FAILED" : "OK", checks,
              failures);
  return failures ? 1 : 0;
}


// elastic_cpp_job.cc's arithmetic on a CUDA tensor: every step adds the job's size to `total`.
int elastic() {
  const int launch_rank = env_int("HVRUN_RANK", -1);
  const int kill_rank = env_int("ELASTIC_KILL_RANK", -1), kill_at = env_int("ELASTIC_KILL_AT", -1);
  const Growth growth = growth_from_env();
  // Growing: the new slot is taken in at a commit after the discovery script lists it; steps
  // are paced until then, at most kWaitSteps of them (20 s), and a few run on the grown job.
  constexpr int64_t kSteps = 10, kWaitSteps = 400, kStepsGrown = 4;
  double total = 0, expected = 0;
  int64_t step = 0;
  int resets = 0, size = 0, rank = -1;
  hvrun::elastic::State state;
  if (!state.add("total", &total, sizeof total).is_ok() || !state.add("expected", &expected, sizeof expected).is_ok() ||
      !state.add("step", &step, sizeof step).is_ok())
    return 2;
  state.on_reset([&](hvrun::Worker&) { ++resets; });
  hvrun::Status status = hvrun::elastic::run(state, [&](hvrun::Worker& w, hvrun::elastic::State& st) {
    size = w.size();
    rank = w.rank();
    int64_t steps_here = 0;  // in this membership
    auto waiting_to_grow = [&] { return growth.wanted() && size < growth.to; };
    auto growing = [&] { return growth.wanted() && (size < growth.to || steps_here < kStepsGrown); };
    while (step < kSteps || (growing() && step < kSteps + kWaitSteps)) {
      if (launch_rank == kill_rank && step == kill_at) ::raise(SIGKILL);
      if (growth.wanted() && rank == 0 && step == growth.at) {
        FILE* f = std::fopen(growth.file.c_str(), "w");
        if (f == nullptr || std::fputs(growth.text.c_str(), f) < 0 || std::fclose(f) != 0) return hvrun::internal_error("could not write " + growth.file);
      }
      if (waiting_to_grow()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      double one = 1.0;
      HVRUN_RETURN_IF_ERROR(w.allreduce("one", hvrun::TensorView{&one, DataType::kFloat64, {1}, kDev, nullptr}));
      total += one;
      expected += size;
      ++step;
      ++steps_here;
      if (step % 2 == 0) HVRUN_RETURN_IF_ERROR(st.commit(w));
    }
    return hvrun::Status::ok();
  });
  if (!status.is_ok()) {
    std::fprintf(stderr, "elastic run failed: %s\n", status.to_string().c_str());
    return 1;
  }
  if (rank == 0) std::printf("TOTAL %g EXPECTED %g SIZE %d RESETS %d\n", total, expected, size, resets);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "elastic") return elastic();
  if (mode != "collectives" && mode != "join" && mode != "abort" && mode != "timeout" &&
      mode != "steady") {
    std::fprintf(stderr, "usage: hvrun_host_plane_worker collectives|join|abort|timeout|elastic|steady\n");
    return 2;
  }
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **worker;
  int rc = 0;
  if (mode == "collectives") rc = collectives(w);
  else if (mode == "join") rc = join(w);
  else if (mode == "steady") rc = steady(w);
  else rc = stuck_collective(w, mode == "timeout");
  if (mode != "abort") (void)w.shutdown();
  return rc;
}

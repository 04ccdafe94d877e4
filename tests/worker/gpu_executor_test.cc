// GpuExecutor's control flow on the CPU: a host-memory DevicePlane (one rank, or a second
// rank's key-value entries written by the test) stands in for CUDA and NCCL, so the order of
// calls (stream waits, one pack and one unpack launch per fused response, the collective, the
// release and the host wait), the results, the set-up checks and the errors are verified without
// a GPU. The real plane runs in tests/gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <thread>

#include "worker_lib/backends/nccl/gpu_executor.h"
#include "worker_lib/backends/nccl/host_plane/host_device_plane.h"
#include "worker_lib/backends/nccl/host_plane/host_stream.h"

namespace hvrun::detail {
namespace {

using cuda::Segment;
using cuda::SegmentTransform;

class MemoryStore final : public KeyValueStore {
 public:
  Status set(const std::string& key, const std::string& value) override {
    values[key] = value;
    return Status::ok();
  }
  Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds) override {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      auto it = values.find(k);
      if (it == values.end()) return deadline_exceeded("key " + k + " missing");
      out.push_back(it->second);
    }
    return out;
  }
  std::map<std::string, std::string> values;
};

// Host memory as "device" memory; records what the executor asked for.
class HostPlane final : public cuda::DevicePlane {
 public:
  struct Log {
    std::vector<std::string> calls;
    int launches = 0;
    int current_device = 0;  // the one calling thread's, as the test sets it
    std::string aborted;
  };
  explicit HostPlane(Log& log) : log_(log) {}

  Result<int> device_count() override { return 2; }
  Result<std::string> pci_bus_id(int ordinal) override { return "0000:0" + std::to_string(ordinal) + ":00.0"; }
  Status use_device(int ordinal) override { return call("use_device " + std::to_string(ordinal)); }
  Status set_current_device(int ordinal) override {
    log_.current_device = ordinal;
    return call("set_current_device " + std::to_string(ordinal));
  }
  Result<int> current_device() override { return log_.current_device; }
  std::string device_description() const override { return "host plane"; }
  std::string nccl_version() const override { return "0.0.0"; }
  std::string features() const override { return "recording plane"; }
  Result<void*> fusion_buffer(size_t bytes) override {
    if (fusion_.size() < bytes) fusion_.resize(bytes);
    return static_cast<void*>(fusion_.data());
  }
  Result<void*> scratch_buffer(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return static_cast<void*>(scratch_.data());
  }
  Result<std::shared_ptr<void>> allocate_output(size_t bytes, void*) override {
    return std::shared_ptr<void>(std::malloc(std::max<size_t>(bytes, 1)), std::free);
  }
  Status wait_for(void* s) override { return call("wait_for " + name(s)); }
  Status release_to(void* s) override { return call("release_to " + name(s)); }
  Status copy_segments(std::span<const Segment> segments, const SegmentTransform& t) override {
    ++log_.launches;
    for (const Segment& seg : segments) HVRUN_RETURN_IF_ERROR(apply(seg, t));
    return call("copy_segments " + std::to_string(segments.size()));
  }
  Result<uint64_t> stage_segments(std::span<const Segment> segments, DataType) override {
    staged_[next_staged_] = {segments.begin(), segments.end()};
    log_.calls.push_back("stage_segments " + std::to_string(segments.size()));
    return next_staged_++;
  }
  Status copy_staged(uint64_t table, const SegmentTransform& t) override {
    auto it = staged_.find(table);
    if (it == staged_.end()) return internal_error("unknown staged table");
    ++log_.launches;
    for (const Segment& seg : it->second) HVRUN_RETURN_IF_ERROR(apply(seg, t));
    return call("copy_staged " + std::to_string(it->second.size()));
  }
  void release_staged(uint64_t table) override {
    staged_.erase(table);
    log_.calls.push_back("release_staged");
  }
  size_t staged_tables() const { return staged_.size(); }
  Status copy_bytes(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return Status::ok();
  }
  Status zero_bytes(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }
  Result<std::string> make_unique_id() override { return std::string(128, 'u'); }
  Status init_communicator(const std::string& id) override {
    has_comm_ = id.size() == 128;
    return call("init_communicator");
  }
  bool has_communicator() const override { return has_comm_; }
  Status allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op, bool average) override {
    if (send != recv) std::memmove(recv, send, count * dtype_size(t));  // one rank: the sum is itself
    return call(std::string("allreduce ") + std::string(reduce_op_name(op)) + (average ? " avg" : "") +
                (send == recv ? " in-place" : " out-of-place"));
  }
  Status broadcast(const void* send, void* recv, size_t bytes, int root) override {
    if (send != recv) std::memmove(recv, send, bytes);
    return call("broadcast root " + std::to_string(root));
  }
  Status allgatherv(void*, std::span<const size_t>, std::span<const size_t> bytes) override {
    return call("allgatherv " + std::to_string(bytes.size()));
  }
  Status alltoallv(const void* in, std::span<const size_t> send, void* out, std::span<const size_t>) override {
    std::memmove(out, in, send[0]);
    return call("alltoallv");
  }
  Status shrink_support() const override { return unimplemented("the recording plane does not shrink"); }
  Status revoke_communicator() override { return call("revoke_communicator"); }
  Status shrink_communicator(std::span<const int>, const cuda::PluginContext&) override {
    return call("shrink_communicator");
  }
  Status synchronize(const std::string&) override { return call("synchronize"); }
  void abort(const std::string& reason) override { log_.aborted = reason; }
  // Its work is done when queued: every token has completed.
  Result<uint64_t> record_completion() override {
    log_.calls.push_back("record_completion");
    return ++tokens_;
  }
  std::optional<Status> poll_completion(uint64_t, const std::string&,
                                        std::chrono::steady_clock::time_point) override {
    return Status::ok();
  }
  void release_completion(uint64_t) override {}

 private:
  Status call(std::string what) {
    log_.calls.push_back(std::move(what));
    return Status::ok();
  }
  static std::string name(void* stream) { return stream ? "stream" + std::to_string(reinterpret_cast<uintptr_t>(stream)) : "default"; }
  static Status apply(const Segment& seg, const SegmentTransform& t) {
    if (t.dtype == DataType::kFloat32) transform<float>(seg, t);
    else if (t.dtype == DataType::kInt32) transform<int32_t>(seg, t);
    else return unimplemented("host plane: float32 and int32 only");
    return Status::ok();
  }
  template <typename T>
  static void transform(const Segment& seg, const SegmentTransform& t) {
    T* dst = static_cast<T*>(seg.dst);
    for (uint64_t i = 0; i < seg.count; ++i) {
      if (!seg.src) {
        dst[i] = t.neutral_op == ReduceOp::kMin ? std::numeric_limits<T>::max() : T(0);
        continue;
      }
      T v = static_cast<const T*>(seg.src)[i];
      if (t.divisor > 1) v = static_cast<T>(v / static_cast<T>(t.divisor));
      if (t.scale != 1.0) v = static_cast<T>(static_cast<double>(v) * t.scale);
      dst[i] = v;
    }
  }
  Log& log_;
  std::vector<std::byte> fusion_, scratch_;
  bool has_comm_ = false;
  std::map<uint64_t, std::vector<Segment>> staged_;
  uint64_t next_staged_ = 1;
  uint64_t tokens_ = 0;
};

std::shared_ptr<PendingOp> cuda_op(const std::string& name, std::vector<int64_t> shape, const void* in,
                                   void* out, void* stream, int device = 0) {
  auto p = std::make_shared<PendingOp>();
  p->shape = std::move(shape);
  p->dtype = DataType::kFloat32;
  p->input = in;
  p->output = out;
  p->device = Device::cuda(device);
  p->stream = stream;
  p->handle = std::make_shared<HandleState>(name);
  return p;
}

v1::Response response(v1::CollectiveOp op, std::vector<std::pair<std::string, std::vector<int64_t>>> tensors) {
  v1::Response r;
  r.set_op(op);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.set_device(v1::DEVICE_KIND_CUDA);
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  for (auto& [name, shape] : tensors) {
    auto* t = r.add_tensors();
    t->set_name(name);
    for (auto d : shape) t->add_shape(d);
  }
  return r;
}

struct Fixture {
  explicit Fixture(int size = 1) {
    job.rank = 0;
    job.size = size;
    job.host = "h";
    job.store = &store;
    job.plane_factory = [this](const cuda::PluginContext&) -> Result<std::unique_ptr<cuda::DevicePlane>> {
      return std::unique_ptr<cuda::DevicePlane>(new HostPlane(log));
    };
  }
  MemoryStore store;
  HostPlane::Log log;
  GpuJob job;
};

void* stream(uintptr_t n) { return reinterpret_cast<void*>(n); }

TEST(GpuExecutor, FusedAllreduceIsOnePackOneCollectiveOneUnpackOnEachStreamOnce) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> a{1, 2, 3}, b(5, 4.0f), out_a(3);
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}, {"b", {5}}});
  r.set_prescale(2);
  r.set_postscale(0.25);
  Status s = ex.execute(r, {cuda_op("a", {3}, a.data(), out_a.data(), stream(1)),
                            cuda_op("b", {5}, b.data(), b.data(), stream(2))});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out_a, (std::vector<float>{0.5f, 1, 1.5f}));
  EXPECT_EQ(b, std::vector<float>(5, 2.0f));
  std::vector<std::string> want{"use_device 0", "init_communicator", "wait_for stream1", "wait_for stream2",
                                "stage_segments 2", "stage_segments 2", "copy_staged 2",
                                "allreduce sum in-place", "copy_staged 2",
                                "release_to stream1", "release_to stream2", "synchronize"};
  EXPECT_EQ(f.log.calls, want);
  EXPECT_EQ(f.store.values.at("nccl/gpu/0"), "h\t0000:00:00.0\t0");
  EXPECT_EQ(f.store.values.at("nccl/unique_id"), "id:" + std::string(128, 'u'));
  EXPECT_EQ(f.store.values.at("nccl/rebuild"),
            "init (a new unique id): no rank holds a communicator of an earlier membership");
}

// The host-memory plane (host_plane/) instead of the recording one.
void use_host_plane(Fixture& f) {
  f.job.plane_factory = [](const cuda::PluginContext& context) -> Result<std::unique_ptr<cuda::DevicePlane>> {
    return cuda::make_host_device_plane(context);
  };
}

// A caller's stream whose work does not end until release() (or the end of the test).
struct HeldStream {
  HeldStream() { stream.enqueue([gate = gate_.get_future().share()] { gate.wait(); }); }
  ~HeldStream() { release(); }
  void release() {
    if (!released_) gate_.set_value();
    released_ = true;
  }
  cuda::HostStream stream{"test-caller"};

 private:
  std::promise<void> gate_;
  bool released_ = false;
};

// The plan executor's way: the response is queued (no host wait, the call returns at once)
// and finished by the executor's own thread once the work completed.
TEST(GpuExecutor, ExecuteThenQueuesWithoutWaitingAndFinishesWhenTheWorkIsDone) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> a{1, 2, 3}, b(5, 4.0f);
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}, {"b", {5}}});
  std::promise<Status> finished;
  ex.execute_then(r, {cuda_op("a", {3}, a.data(), a.data(), stream(1)),
                      cuda_op("b", {5}, b.data(), b.data(), stream(1))},
                  [&](Status s) { finished.set_value(std::move(s)); });
  auto done = finished.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(done.get().is_ok());
  ex.drain();
  EXPECT_EQ(ex.in_flight(), 0u);
  std::vector<std::string> want{"use_device 0", "init_communicator", "wait_for stream1",
                                "stage_segments 2", "stage_segments 2", "copy_staged 2",
                                "allreduce sum in-place", "copy_staged 2", "release_to stream1",
                                "record_completion"};
  EXPECT_EQ(f.log.calls, want);  // no synchronize: nothing waited on the host
}

// The host-memory plane (host_plane/): a response held behind its caller's stream is queued,
// not waited for; it finishes on another thread when the caller's stream lets it run, and a
// response queued behind it finishes after it.
TEST(GpuExecutor, AResponseHeldOnTheStreamDoesNotHoldTheThreadThatQueuedIt) {
  Fixture f;
  use_host_plane(f);
  GpuExecutor ex(f.job);
  HeldStream caller;
  std::vector<float> a{1, 2, 3}, b{4, 5};
  std::vector<std::pair<int, std::thread::id>> order;
  std::mutex order_mutex;
  std::promise<void> both;
  auto finish = [&](int which) {
    return [&, which](Status s) {
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      std::lock_guard<std::mutex> lock(order_mutex);
      order.emplace_back(which, std::this_thread::get_id());
      if (order.size() == 2) both.set_value();
    };
  };
  const auto start = std::chrono::steady_clock::now();
  ex.execute_then(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}}),
                  {cuda_op("a", {3}, a.data(), a.data(), &caller.stream)}, finish(1));
  ex.execute_then(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"b", {2}}}),
                  {cuda_op("b", {2}, b.data(), b.data(), nullptr)}, finish(2));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ex.in_flight(), 2u);
  {
    std::lock_guard<std::mutex> lock(order_mutex);
    EXPECT_TRUE(order.empty());
  }
  caller.release();
  auto done = both.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0].first, 1);
  EXPECT_EQ(order[1].first, 2);
  EXPECT_NE(order[0].second, std::this_thread::get_id());
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));  // one rank: the sum is itself
}

// A token that never completes fails at the op timeout, and the plane's failure is then its
// own: the next response fails at once with it.
TEST(GpuExecutor, AQueuedResponseFailsAtTheOpTimeoutAndThePlaneWithIt) {
  Fixture f;
  f.job.op_timeout = std::chrono::milliseconds(300);
  use_host_plane(f);
  GpuExecutor ex(f.job);
  HeldStream caller;
  std::vector<float> a{1, 2, 3};
  std::promise<Status> failed;
  ex.execute_then(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}}),
                  {cuda_op("a", {3}, a.data(), a.data(), &caller.stream)},
                  [&](Status s) { failed.set_value(std::move(s)); });
  auto done = failed.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  Status s = done.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
  EXPECT_NE(s.message().find("allreduce of 'a'"), std::string::npos) << s.message();
  Status next = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}}),
                           {cuda_op("a", {3}, a.data(), a.data(), nullptr)});
  EXPECT_EQ(next.code(), StatusCode::kDeadlineExceeded) << next.to_string();
}

// The plane's own failure (here a host wait's op timeout) ends the work queued before a token:
// the token's event still completes as the stream drains, yet its poll says the failure, not OK.
TEST(HostDevicePlane, ATokenWhoseWorkTheOwnersFailureEndedFailsWithIt) {
  auto plane = cuda::make_host_device_plane(
      {.rank = 0, .size = 1, .host = "h", .op_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(plane->use_device(0).is_ok());
  HeldStream caller;
  ASSERT_TRUE(plane->wait_for(&caller.stream).is_ok());
  float source = 1.0f, target = 0.0f;
  Segment copy{&source, &target, 1};
  ASSERT_TRUE(plane->copy_segments({&copy, 1}, {.dtype = DataType::kFloat32}).is_ok());
  auto token = plane->record_completion();
  ASSERT_TRUE(token.is_ok()) << token.status().to_string();
  Status waited = plane->synchronize("the held copy");
  EXPECT_EQ(waited.code(), StatusCode::kDeadlineExceeded) << waited.to_string();
  std::optional<Status> polled;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!polled && std::chrono::steady_clock::now() < until) {
    polled = plane->poll_completion(*token, "the held copy", until);
    if (!polled) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(polled.has_value());
  EXPECT_EQ(polled->code(), StatusCode::kDeadlineExceeded) << polled->to_string();
  caller.release();
  plane->release_completion(*token);
  EXPECT_EQ(target, 0.0f);  // the copy never ran
}

// A training step reduces the same tensors from the same memory every step: the second step
// launches the first one's staged tables and stages, builds and uploads nothing; tensors in
// other memory get tables of their own.
TEST(GpuExecutor, AStepLikeTheLastOneReusesItsStagedTables) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> a{1, 2, 3}, b(5, 4.0f);
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}, {"b", {5}}});
  r.set_postscale(0.5);
  auto step = [&](float* out_b) {
    return ex.execute(r, {cuda_op("a", {3}, a.data(), a.data(), stream(1)),
                          cuda_op("b", {5}, b.data(), out_b, stream(1))});
  };
  ASSERT_TRUE(step(b.data()).is_ok());
  EXPECT_EQ(ex.tables_staged(), 2u);
  f.log.calls.clear();
  ASSERT_TRUE(step(b.data()).is_ok());
  EXPECT_EQ(a, (std::vector<float>{0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(b, std::vector<float>(5, 1.0f));
  EXPECT_EQ(ex.tables_staged(), 2u);
  std::vector<std::string> want{"wait_for stream1", "copy_staged 2", "allreduce sum in-place",
                                "copy_staged 2", "release_to stream1", "synchronize"};
  EXPECT_EQ(f.log.calls, want);
  // Another output: new tables, and the kept ones stay for a step that comes back to them.
  std::vector<float> out(5);
  ASSERT_TRUE(step(out.data()).is_ok());
  EXPECT_EQ(out, std::vector<float>(5, 0.5f));
  EXPECT_EQ(ex.tables_staged(), 4u);
  ASSERT_TRUE(step(b.data()).is_ok());
  EXPECT_EQ(ex.tables_staged(), 4u);
  EXPECT_EQ(b, std::vector<float>(5, 0.5f));
}

// A thread about to wait may run an agreed round itself: on a thread other than the one that
// set the plane up, the executor makes its GPU current for the call and gives the thread its own
// device back after; on the set-up thread, or where its GPU is current already, it sets nothing.
TEST(GpuExecutor, AnotherThreadGetsTheGpuForTheCallAndItsOwnDeviceBack) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> a{1, 2, 3};
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}});
  auto run = [&] { return ex.execute(r, {cuda_op("a", {3}, a.data(), a.data(), nullptr)}); };
  ASSERT_TRUE(run().is_ok());
  f.log.calls.clear();
  Status on_other;
  f.log.current_device = 1;  // the framework's choice on that thread
  std::thread([&] { on_other = run(); }).join();
  ASSERT_TRUE(on_other.is_ok()) << on_other.to_string();
  EXPECT_EQ(f.log.calls.front(), "set_current_device 0");
  EXPECT_EQ(f.log.calls.back(), "set_current_device 1");
  EXPECT_EQ(f.log.current_device, 1);
  f.log.calls.clear();
  f.log.current_device = 0;
  std::thread([&] { on_other = run(); }).join();
  ASSERT_TRUE(on_other.is_ok());
  ASSERT_TRUE(run().is_ok());
  for (const std::string& c : f.log.calls) EXPECT_EQ(c.rfind("set_current_device", 0), std::string::npos) << c;
}

// Past StagedFusions::kKept layouts the least recently used one's tables are released.
TEST(GpuExecutor, StagedTablesAreBoundedAndReleased) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<std::vector<float>> outs(cuda::StagedFusions::kKept + 3, std::vector<float>(5));
  std::vector<float> a{1, 2, 3}, b(5, 4.0f);
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {3}}, {"b", {5}}});
  for (auto& out : outs) {
    ASSERT_TRUE(ex.execute(r, {cuda_op("a", {3}, a.data(), a.data(), nullptr),
                               cuda_op("b", {5}, b.data(), out.data(), nullptr)})
                    .is_ok());
    EXPECT_EQ(out, std::vector<float>(5, 4.0f));
  }
  EXPECT_EQ(ex.tables_staged(), 2 * outs.size());
  EXPECT_EQ(std::count(f.log.calls.begin(), f.log.calls.end(), "release_staged"), 2 * 3);
}

TEST(GpuExecutor, LoneAllreduceGoesStraightFromInputToOutputAndAverageIsNcclAvg) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> in{1, 2}, out(2);
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}});
  r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
  ASSERT_TRUE(ex.execute(r, {cuda_op("x", {2}, in.data(), out.data(), nullptr)}).is_ok());
  EXPECT_EQ(out, in);
  EXPECT_EQ(f.log.launches, 0) << "no pack/unpack for a lone tensor without scaling";
  EXPECT_NE(std::find(f.log.calls.begin(), f.log.calls.end(), "allreduce sum avg out-of-place"), f.log.calls.end());
  EXPECT_NE(std::find(f.log.calls.begin(), f.log.calls.end(), "wait_for default"), f.log.calls.end());
}

TEST(GpuExecutor, AverageWithAJoinedRankDividesWhileUnpacking) {
  Fixture f(3);
  f.store.values["nccl/gpu/1"] = "h\t0000:01:00.0\t1";
  f.store.values["nccl/gpu/2"] = "g\t0000:01:00.0\t1";
  GpuExecutor ex(f.job);
  std::vector<float> a{8, 6}, b{4, 2};
  auto r = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"a", {2}}, {"b", {2}}});
  r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
  r.set_contributing_ranks(2);  // one of 3 ranks joined: ncclAvg would divide by 3
  ASSERT_TRUE(ex.execute(r, {cuda_op("a", {2}, a.data(), a.data(), nullptr),
                             cuda_op("b", {2}, b.data(), b.data(), nullptr)}).is_ok());
  // The host plane's "sum" over ranks is this rank's data; the unpack divides by 2.
  EXPECT_EQ(a, (std::vector<float>{4, 3}));
  EXPECT_EQ(b, (std::vector<float>{2, 1}));
  EXPECT_NE(std::find(f.log.calls.begin(), f.log.calls.end(), "allreduce sum in-place"), f.log.calls.end());
}

TEST(GpuExecutor, LibraryAllocatedOutputsAreDeviceTensorsOnTheInputsStream) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  auto ag = response(v1::COLLECTIVE_OP_ALLGATHER, {{"g", {3, 2}}});
  ag.mutable_tensors(0)->add_first_dims(3);
  auto g = cuda_op("g", {3, 2}, x.data(), nullptr, stream(7));
  ASSERT_TRUE(ex.execute(ag, {g}).is_ok());
  const OwnedTensor& out = g->handle->output;
  EXPECT_TRUE(out.device.is_cuda());
  EXPECT_EQ(out.stream, stream(7));
  EXPECT_EQ(out.shape, (std::vector<int64_t>{3, 2}));
  ASSERT_NE(out.device_memory, nullptr);
  EXPECT_EQ(std::memcmp(out.device_memory.get(), x.data(), 24), 0);
  EXPECT_EQ(f.log.launches, 1) << "a lone allgather is gathered straight into its output: no unpack";

  auto rs = response(v1::COLLECTIVE_OP_REDUCESCATTER, {{"r", {3, 2}}});
  rs.set_postscale(2);
  auto r = cuda_op("r", {3, 2}, x.data(), nullptr, stream(7));
  ASSERT_TRUE(ex.execute(rs, {r}).is_ok());
  const float* got = static_cast<const float*>(r->handle->output.device_memory.get());
  EXPECT_EQ(r->handle->output.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(got[5], 12.0f);

  auto a2a = response(v1::COLLECTIVE_OP_ALLTOALL, {{"t", {3, 2}}});
  a2a.mutable_tensors(0)->add_splits_matrix(3);
  auto t = cuda_op("t", {3, 2}, x.data(), nullptr, stream(7));
  ASSERT_TRUE(ex.execute(a2a, {t}).is_ok());
  EXPECT_EQ(t->handle->received_splits, (std::vector<int64_t>{3}));
  EXPECT_EQ(std::memcmp(t->handle->output.device_memory.get(), x.data(), 24), 0);
}

TEST(GpuExecutor, CustomAllocatorProvidesTheOutputs) {
  Fixture f;
  int calls = 0;
  f.job.allocator = [&](Device d, size_t bytes, void* s) -> std::shared_ptr<void> {
    ++calls;
    EXPECT_EQ(d.index, 0);
    EXPECT_EQ(s, stream(3));
    return std::shared_ptr<void>(std::malloc(bytes), std::free);
  };
  GpuExecutor ex(f.job);
  std::vector<float> x{1, 2};
  auto ag = response(v1::COLLECTIVE_OP_ALLGATHER, {{"g", {2}}});
  ag.mutable_tensors(0)->add_first_dims(2);
  ASSERT_TRUE(ex.execute(ag, {cuda_op("g", {2}, x.data(), nullptr, stream(3))}).is_ok());
  EXPECT_EQ(calls, 1);
}

TEST(GpuExecutor, TwoRanksOnOneGpuFailBeforeTheCommunicator) {
  Fixture f(2);
  f.store.values["nccl/gpu/1"] = "h\t0000:00:00.0\t0";  // rank 1: same host, same GPU
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("ranks 0 and 1 on host h both use the GPU at PCI 0000:00:00.0"), std::string::npos)
      << s.message();
  EXPECT_EQ(std::find(f.log.calls.begin(), f.log.calls.end(), "init_communicator"), f.log.calls.end());
  // Told the other ranks, and every later CUDA response fails the same way.
  EXPECT_EQ(f.store.values.at("nccl/gpu/0").rfind("error:", 0), 0u);
  EXPECT_EQ(f.store.values.at("nccl/unique_id").rfind("error:ranks 0 and 1 on host h", 0), 0u)
      << f.store.values.at("nccl/unique_id");
  EXPECT_EQ(ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}), {nullptr}).code(),
            StatusCode::kFailedPrecondition);
}

TEST(GpuExecutor, AnotherRanksSetUpErrorIsReportedWithItsWords) {
  Fixture f(2);
  f.store.values["nccl/gpu/1"] = "error:CUDA cudaSetDevice(0) failed on rank 1: no driver";
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  EXPECT_NE(s.message().find("rank 1 could not set up its GPU data plane: CUDA cudaSetDevice(0) failed"),
            std::string::npos)
      << s.message();
  // Passed on to the ranks waiting for rank 0's answer, as it is.
  EXPECT_EQ(f.store.values.at("nccl/unique_id"), "error:" + s.message());
}

// Rank 0's own failure (here: no GPU data plane to load) reaches the others, naming rank 0.
TEST(GpuExecutor, RankZerosOwnSetUpFailureReachesTheOthers) {
  Fixture f(2);
  f.job.plane_factory = [](const cuda::PluginContext&) -> Result<std::unique_ptr<cuda::DevicePlane>> {
    return failed_precondition("no libhvrun_cuda.so here");
  };
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(f.store.values.at("nccl/unique_id"),
            "error:rank 0 could not set up its GPU data plane: no libhvrun_cuda.so here");
}

// Ranks other than 0 read rank 0's answer alone, never every rank's GPU: a set-up of N ranks
// reads O(N) keys in all.
TEST(GpuExecutor, AnotherRankReadsOnlyRankZerosAnswer) {
  Fixture f(3);
  f.job.rank = 2;
  f.job.setup_timeout = std::chrono::milliseconds(2000);
  f.store.values["nccl/rebuild"] = "init (a new unique id): no rank holds a communicator";  // before the id
  f.store.values["nccl/unique_id"] = "id:" + std::string(128, 'u');
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  ASSERT_TRUE(s.is_ok()) << s.to_string();  // ranks 0 and 1 posted nothing: not read
  EXPECT_EQ(f.store.values.at("nccl/gpu/2"), "h\t0000:00:00.0\t0");
}

TEST(GpuExecutor, AnotherRankFailsWithRankZerosWordsAtOnce) {
  Fixture f(2);
  f.job.rank = 1;
  f.store.values["nccl/unique_id"] =
      "error:ranks 0 and 1 on host h both use the GPU at PCI 0000:00:00.0";
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "ranks 0 and 1 on host h both use the GPU at PCI 0000:00:00.0");
  EXPECT_EQ(std::find(f.log.calls.begin(), f.log.calls.end(), "init_communicator"), f.log.calls.end());
}

TEST(GpuExecutor, ATensorOnAnotherGpuIsRefused) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  ASSERT_TRUE(ex.execute(response(v1::COLLECTIVE_OP_BROADCAST, {{"x", {2}}}),
                         {cuda_op("x", {2}, x.data(), x.data(), nullptr, 0)}).is_ok());
  Status s = ex.execute(response(v1::COLLECTIVE_OP_BROADCAST, {{"y", {2}}}),
                        {cuda_op("y", {2}, x.data(), x.data(), nullptr, 1)});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'y' is on cuda:1 but rank 0's GPU data plane runs on cuda:0"), std::string::npos)
      << s.message();
}

TEST(GpuExecutor, AbortBeforeSetUpFailsWithTheReasonAndReachesThePlaneLater) {
  Fixture f;
  GpuExecutor ex(f.job);
  ex.abort("rank 3 died");
  std::vector<float> x(2);
  Status s = ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                        {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("rank 3 died"), std::string::npos) << s.message();
}

TEST(GpuExecutor, AbortAfterSetUpIsPassedToThePlane) {
  Fixture f;
  GpuExecutor ex(f.job);
  std::vector<float> x(2);
  ASSERT_TRUE(ex.execute(response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}}),
                         {cuda_op("x", {2}, x.data(), x.data(), nullptr)}).is_ok());
  ex.abort("stall shutdown");
  EXPECT_EQ(f.log.aborted, "stall shutdown");
}

// An elastic reset hands what the ended executor kept to the next one in this process: here a
// plane that cannot shrink, so the next membership is told why, and makes a new communicator.
TEST(GpuExecutor, AfterAMembershipChangeTheNextExecutorSaysWhyItMakesANewCommunicator) {
  (void)take_carried_communicator();  // nothing left from another test
  Fixture first;
  first.job.elastic = true;
  std::vector<float> x(2);
  auto allreduce = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}});
  {
    GpuExecutor ex(first.job);
    ASSERT_TRUE(ex.execute(allreduce, {cuda_op("x", {2}, x.data(), x.data(), nullptr)}).is_ok());
    ex.membership_changed("rank 1 left");
    EXPECT_EQ(first.log.aborted, "rank 1 left");
    ex.carry_communicator_over();
  }
  Fixture second;
  second.job.elastic = true;
  GpuExecutor next(second.job);
  Status s = next.execute(allreduce, {cuda_op("x", {2}, x.data(), x.data(), nullptr)});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(second.store.values.at("nccl/gpu/0"), "h\t0000:00:00.0\t0\tnone\tthe recording plane does not shrink");
  EXPECT_EQ(second.store.values.at("nccl/rebuild"),
            "init (a new unique id) after an elastic reset: rank 0 kept no communicator: the recording plane "
            "does not shrink");
  EXPECT_FALSE(take_carried_communicator().has_value());  // taken by `next`
}

TEST(GpuExecutor, WithoutAMembershipChangeOrOutsideAnElasticJobNothingIsCarried) {
  (void)take_carried_communicator();
  std::vector<float> x(2);
  auto allreduce = response(v1::COLLECTIVE_OP_ALLREDUCE, {{"x", {2}}});
  Fixture elastic;
  elastic.job.elastic = true;
  {
    GpuExecutor ex(elastic.job);
    ASSERT_TRUE(ex.execute(allreduce, {cuda_op("x", {2}, x.data(), x.data(), nullptr)}).is_ok());
    ex.carry_communicator_over();  // a shutdown that ends the job
  }
  EXPECT_FALSE(take_carried_communicator().has_value());
  Fixture plain;
  {
    GpuExecutor ex(plain.job);
    ASSERT_TRUE(ex.execute(allreduce, {cuda_op("x", {2}, x.data(), x.data(), nullptr)}).is_ok());
    ex.membership_changed("no elastic job");
    ex.carry_communicator_over();
  }
  EXPECT_FALSE(take_carried_communicator().has_value());
}

}  // namespace
}  // namespace hvrun::detail

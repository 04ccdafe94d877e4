// hvrun_worker_bench: collectives through the whole worker library (API, negotiation with the
// coordinator, fusion buffer, Gloo data plane) beside the raw backend (Gloo alone, bootstrapped
// without the coordinator: bench/worker/raw_gloo.h), size by size in the same run so both see
// the same machine load. Run it as a job:
//
//   hvrun -np 2 -H localhost:2 build/bin/hvrun_worker_bench [--ops allreduce,allgather,broadcast]
//       [--min-bytes 4096] [--max-bytes 4194304] [--iters 20] [--warmup 3]
//       [--latency-iters 500] [--backend both|hvrun|raw] [--json]
//
// Rank 0 prints the nccl-tests table (bench/worker/bench_report.h): sizes grow x4 from
// --min-bytes to --max-bytes (256 MiB = 268435456 for the full sweep); "vs raw" is hvrun's busbw
// over the raw backend's at the same size. Then the latency of one 4-byte allreduce (median and
// mean us) through each. Broadcast's root is the last rank (rank 0 reports a receive).
// --backend raw never contacts the coordinator (Gloo only). Exit status 1 when any element came
// back wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/worker/bench_report.h"
#include "bench/worker/raw_gloo.h"
#include "hvrun/hvrun.h"

namespace {

using hvrun::bench::RawGloo;
using hvrun::bench::Row;

struct Flags {
  std::vector<std::string> ops = {"allreduce", "allgather", "broadcast"};
  int64_t min_bytes = 4096;
  int64_t max_bytes = 4LL << 20;
  int iters = 20;
  int warmup = 3;
  int latency_iters = 500;
  int latency_warmup = 20;
  std::string backend = "both";
  bool json = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "hvrun_worker_bench: %s\nusage: hvrun -np N hvrun_worker_bench [--ops a,b] "
               "[--min-bytes B] [--max-bytes B] [--iters N] [--warmup N] [--latency-iters N] "
               "[--latency-warmup N] "
               "[--backend both|hvrun|raw] [--json]\n",
               problem.c_str());
  std::exit(2);
}

int64_t positive(const std::string& flag, const std::string& text, int64_t minimum) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < minimum)
    usage(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
  return v;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--ops" || a == "--op") {
      f.ops.clear();
      std::stringstream list(value());
      for (std::string op; std::getline(list, op, ',');) {
        if (op != "allreduce" && op != "allgather" && op != "broadcast")
          usage("unknown op '" + op + "' (allreduce, allgather, broadcast)");
        f.ops.push_back(op);
      }
    } else if (a == "--min-bytes") f.min_bytes = positive(a, value(), 4);
    else if (a == "--max-bytes") f.max_bytes = positive(a, value(), 4);
    else if (a == "--iters") f.iters = static_cast<int>(positive(a, value(), 1));
    else if (a == "--warmup") f.warmup = static_cast<int>(positive(a, value(), 0));
    else if (a == "--latency-iters") f.latency_iters = static_cast<int>(positive(a, value(), 0));
    else if (a == "--latency-warmup") f.latency_warmup = static_cast<int>(positive(a, value(), 0));
    else if (a == "--backend") {
      f.backend = value();
      if (f.backend != "both" && f.backend != "hvrun" && f.backend != "raw")
        usage("--backend is both, hvrun or raw, got '" + f.backend + "'");
    } else if (a == "--json") f.json = true;
    else usage("unknown flag " + a);
  }
  return f;
}

// One collective on `count` result floats through one backend. Fills the input first when
// verifying; timed calls reuse what is there (the data does not change the cost).
class Runner {
 public:
  Runner(hvrun::Worker* worker, RawGloo* raw, int rank, int size, int64_t max_count)
      : worker_(worker), raw_(raw), rank_(rank), size_(size),
        buf_(static_cast<size_t>(max_count) + static_cast<size_t>(size)),
        out_(buf_.size()) {}

  // Returns microseconds, and adds wrong elements to *wrong when verifying.
  double run(bool use_raw, const std::string& op, int64_t count, bool verify, int64_t* wrong) {
    if (verify) fill(op, count);
    // The call's arguments are built before the clock starts, as the raw rows' are: what is
    // timed is the library call, not the benchmark's string formatting.
    name_ = "bench." + op + "." + std::to_string(count);
    view_ = hvrun::TensorView{buf_.data(), hvrun::DataType::kFloat32, {count}};
    auto start = std::chrono::steady_clock::now();
    const float* result = use_raw ? run_raw(op, count) : run_hvrun(op, count);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count();
    if (!result) *wrong += count;
    else if (verify) *wrong += check(op, count, result);
    return us;
  }

 private:
  // Broadcast's root is the last rank, so that rank 0 (which reports) times a receive: a root
  // returns once its bytes are sent and would time only its own sends.
  int root() const { return size_ - 1; }

  void fill(const std::string& op, int64_t count) {
    float v = op == "allreduce" ? 1.0f : static_cast<float>(rank_);
    std::fill(buf_.begin(), buf_.begin() + count, v);
  }

  int64_t check(const std::string& op, int64_t count, const float* r) const {
    int64_t wrong = 0;
    int64_t per_rank = count / size_;
    for (int64_t i = 0; i < count; ++i) {
      float want = op == "allreduce"   ? static_cast<float>(size_)
                   : op == "broadcast" ? static_cast<float>(root())
                                       : static_cast<float>(i / per_rank);
      wrong += r[i] != want;
    }
    return wrong;
  }

  const float* run_raw(const std::string& op, int64_t count) {
    size_t n = static_cast<size_t>(count);
    if (op == "allreduce") raw_->allreduce_sum(buf_.data(), n);
    else if (op == "broadcast") raw_->broadcast(buf_.data(), n, root());
    else {
      raw_->allgather(buf_.data(), out_.data(), n / static_cast<size_t>(size_));
      return out_.data();
    }
    return buf_.data();
  }

  const float* run_hvrun(const std::string& op, int64_t count) {
    const std::string& name = name_;
    if (op == "allreduce") return worker_->allreduce(name, view_).is_ok() ? buf_.data() : nullptr;
    if (op == "broadcast")
      return worker_->broadcast(name, view_, root()).is_ok() ? buf_.data() : nullptr;
    int64_t rows = count / size_;
    auto out = worker_->allgather(
        name, hvrun::ConstTensorView(buf_.data(), hvrun::DataType::kFloat32, {rows}));
    if (!out.is_ok() || out->bytes.size() != static_cast<size_t>(count) * 4) return nullptr;
    gathered_ = std::move(out->bytes);
    return reinterpret_cast<const float*>(gathered_.data());
  }

  hvrun::Worker* worker_;
  RawGloo* raw_;
  int rank_;
  int size_;
  std::vector<float> buf_;
  std::vector<float> out_;
  decltype(hvrun::OwnedTensor{}.bytes) gathered_;
  std::string name_;         // the current call's tensor name
  hvrun::TensorView view_{};  // and its buffer (allreduce, broadcast)
};

// Times each backend on one op and size: hvrun's warm-ups and iterations, then raw Gloo's, one
// block after the other. (Alternating call by call was tried: hvrun's threads, still winding
// down after each call, then slowed the raw call that followed, 81 -> 152 us for 4 bytes.)
std::vector<Row> measure(Runner& runner, const Flags& f, const std::vector<bool>& backends,
                         const std::string& op, int64_t count, int size) {
  std::vector<Row> rows;
  std::vector<std::vector<double>> times(backends.size());
  std::vector<int64_t> wrong(backends.size(), 0);
  for (size_t b = 0; b < backends.size(); ++b) {
    for (int i = 0; i < f.warmup + f.iters; ++i) {
      bool timed = i >= f.warmup;
      bool verify = !timed || i == f.warmup + f.iters - 1;
      double us = runner.run(backends[b], op, count, verify, &wrong[b]);
      if (timed) times[b].push_back(us);
    }
  }
  for (size_t b = 0; b < backends.size(); ++b) {
    Row row;
    row.backend = backends[b] ? "raw" : "hvrun";
    row.op = op;
    row.bytes = count * 4;
    row.count = count;
    row.redop = op == "allreduce" ? "sum" : "none";
    row.median_us = hvrun::bench::median(times[b]);
    row.mean_us = hvrun::bench::mean(times[b]);
    row.wrong = wrong[b];
    hvrun::bench::fill_bandwidth(row, size);
    rows.push_back(row);
  }
  if (rows.size() == 2 && rows[1].busbw > 0) rows[0].ratio = rows[0].busbw / rows[1].busbw;
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  std::unique_ptr<hvrun::Worker> worker;
  int rank = 0, size = 1;
  hvrun::bench::RawGlooOptions raw_options;
  if (f.backend != "raw") {
    auto init = hvrun::Worker::init();
    if (!init.is_ok()) {
      std::fprintf(stderr, "hvrun_worker_bench: init: %s\n", init.status().to_string().c_str());
      return 1;
    }
    worker = std::move(init).value();
    rank = worker->rank();
    size = worker->size();
  }
  std::unique_ptr<RawGloo> raw;
  if (f.backend != "hvrun") {
    std::string error;
    if (!RawGloo::options_from_environment(&raw_options, &error) ||
        !(raw = RawGloo::connect(raw_options, &error))) {
      std::fprintf(stderr, "hvrun_worker_bench: %s\n", error.c_str());
      return 1;
    }
    rank = raw->rank();
    size = raw->size();
  }
  std::vector<bool> backends;  // false = hvrun, true = raw (hvrun first: its row gets the ratio)
  if (worker) backends.push_back(false);
  if (raw) backends.push_back(true);

  Runner runner(worker.get(), raw.get(), rank, size, f.max_bytes / 4);
  if (rank == 0 && !f.json)
    std::printf("# hvrun_worker_bench: %d ranks, float32, %d timed iterations after %d warm-ups, "
                "backends: %s\n",
                size, f.iters, f.warmup, f.backend.c_str());
  if (rank == 0) hvrun::bench::print_header(f.json);
  int64_t total_wrong = 0;
  for (const std::string& op : f.ops) {
    for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
      int64_t count = std::max<int64_t>(bytes / 4 / size * size, size);
      for (const Row& row : measure(runner, f, backends, op, count, size)) {
        total_wrong += row.wrong;
        if (rank == 0) hvrun::bench::print_row(row, f.json);
      }
    }
  }

  if (f.latency_iters > 0) {
    Flags lat = f;
    lat.iters = f.latency_iters;
    lat.warmup = std::max(f.warmup, f.latency_warmup);
    std::vector<Row> rows = measure(runner, lat, backends, "allreduce", 1, size);
    for (const Row& row : rows) {
      total_wrong += row.wrong;
      if (rank == 0)
        hvrun::bench::print_metric("latency allreduce 4 B " + row.backend, row.median_us,
                                   row.mean_us, "us", f.json);
    }
    if (rank == 0 && rows.size() == 2)
      hvrun::bench::print_metric("latency allreduce 4 B hvrun - raw",
                                 rows[0].median_us - rows[1].median_us,
                                 rows[0].mean_us - rows[1].mean_us, "us", f.json,
                                 "target: median <= 100 us");
  }
  if (worker) (void)worker->shutdown();
  return total_wrong == 0 ? 0 : 1;
}

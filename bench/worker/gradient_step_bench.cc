// hvrun_gradient_bench: one data-parallel gradient step of ResNet-50 — its 161 parameter
// tensors allreduced (Average), all submitted asynchronously in backward order, then waited
// for — beside one packed allreduce of the same bytes (the floor fusion aims at), through hvrun
// and through the raw backend (Gloo alone, bench/worker/raw_gloo.h). Run it as a job, once with
// fusion on (the default) and once with it off:
//
//   hvrun -np 2 -H localhost:2 [--fusion-threshold-mb 0] build/bin/hvrun_gradient_bench
//       [--params resnet50_params.txt] [--steps 20] [--warmup 3] [--backend both|hvrun]
//       [--label fusion-on] [--trace] [--mark-steps] [--no-shm-raw] [--reference-first]
//       [--huge-pages] [--step-alone] [--host-plane-cuda] [--json]
//
// Prints steps/s (median and mean over --steps after --warmup; the variants take turns, step by
// step, so they see the same machine load) for: the step through hvrun, one packed allreduce
// through hvrun (Average, and Sum as raw Gloo runs it); when the job is on one host, through
// the shared-memory data plane called directly (a segment of its own): the step's fused
// Average of the same tensors (it and the step take turns, every other round each) and the
// packed Average; the packed allreduce and the 161 allreduces one by one on raw Gloo; then the
// step as a fraction of each. Exit 1 on a wrong element.
// --trace adds where a step's time goes, seen from the trainer (medians over the timed steps):
// submitting the 161 tensors, until the first handle completes, until the last, and how many
// completion waves there were (handles waited in submission order; a gap over 0.3 ms between
// two completions starts a new wave: each wave is at least one response, one collective).
// --no-shm-raw leaves out the data plane called directly (the step then runs every round).
// --reference-first allocates the raw packed reference's buffer first, before the tensors (by
// default it comes after them): where a buffer's pages came from moves a pass over it by
// several percent on some machines (bench/RESULTS.md, section 31).
// --huge-pages puts every buffer of 2 MiB or more (the large tensors and the references) on
// transparent huge pages (bench_buffers.h): the step and its references then compare on the
// same kind of pages; the run says when the kernel's THP mode gives it none.
// --step-alone runs the step alone, back to back (no reference takes turns with it, which
// would push its tensors out of the caches between two steps; implies --backend hvrun and
// --no-shm-raw): how a trainer's steps follow one another, and how bench/python/step_bench.py
// runs hvrun.torch's, so the two compare.
// --host-plane-cuda submits the step's tensors as CUDA tensors (cuda:0) of the host device
// plane: host memory that the GPU executor reduces through the host plane, so the GPU path's
// step (fusion, segment tables, its steady state) is timed on CPUs. Run hvrun with
// --device-plane host; implies --step-alone.
// --mark-steps: each step marks two phases ("backward" while submitting, "wait") and its end,
// as a trainer does for straggler attribution (docs/metrics.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench/worker/bench_buffers.h"
#include "bench/worker/bench_report.h"
#include "bench/worker/directory_store.h"
#include "bench/param_file.h"
#include "bench/worker/raw_gloo.h"
#include "hvrun/hvrun.h"
#include "worker_lib/backends/shm/shm_backend.h"

#ifndef HVRUN_RESNET50_PARAMS
#define HVRUN_RESNET50_PARAMS "bench/data/resnet50_params.txt"
#endif

namespace {

using hvrun::bench::ParamShape;
using hvrun::bench::read_param_file;

struct Flags {
  std::string params = HVRUN_RESNET50_PARAMS;
  int steps = 20;
  int warmup = 3;
  std::string backend = "both";
  std::string label;
  bool json = false;
  bool trace = false;
  bool mark_steps = false;  // each step marks its phases and its end (straggler attribution)
  bool shm_raw = true;      // the data plane called directly beside the library
  bool reference_first = false;  // the raw packed buffer allocated before the tensors
  bool huge_pages = false;       // buffers on transparent huge pages (bench_buffers.h)
  bool step_alone = false;       // the step only, no reference taking turns with it
  bool host_plane_cuda = false;  // the step's tensors as the host device plane's CUDA tensors
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "hvrun_gradient_bench: %s\nusage: hvrun -np N hvrun_gradient_bench [--params PATH] "
               "[--steps N] [--warmup N] [--backend both|hvrun] [--label TEXT] [--trace] [--mark-steps] "
               "[--no-shm-raw] [--reference-first] [--huge-pages] [--step-alone] [--host-plane-cuda] "
               "[--json]\n",
               problem.c_str());
  std::exit(2);
}

int count_flag(const std::string& flag, const std::string& text, int minimum) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < minimum)
    usage(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
  return static_cast<int>(v);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--params") f.params = value();
    else if (a == "--steps") f.steps = count_flag(a, value(), 1);
    else if (a == "--warmup") f.warmup = count_flag(a, value(), 0);
    else if (a == "--backend") {
      f.backend = value();
      if (f.backend != "both" && f.backend != "hvrun")
        usage("--backend is both or hvrun, got '" + f.backend + "'");
    } else if (a == "--label") f.label = value();
    else if (a == "--json") f.json = true;
    else if (a == "--trace") f.trace = true;
    else if (a == "--mark-steps") f.mark_steps = true;
    else if (a == "--no-shm-raw") f.shm_raw = false;
    else if (a == "--reference-first") f.reference_first = true;
    else if (a == "--huge-pages") f.huge_pages = true;
    else if (a == "--step-alone") f.step_alone = true;
    else if (a == "--host-plane-cuda") f.host_plane_cuda = f.step_alone = true;
    else usage("unknown flag " + a);
  }
  if (f.step_alone) {
    f.backend = "hvrun";
    f.shm_raw = false;
  }
  return f;
}

using hvrun::bench::Floats;

struct Tensor {
  std::string name;
  Floats data;
};

// "name 64x3x7x7" per line.
std::vector<ParamShape> read_params(const std::string& path) {
  auto params = read_param_file(path);
  if (!params) usage("cannot read " + path + " (pass --params PATH)");
  if (params->empty()) usage(path + " lists no tensors");
  return std::move(*params);
}

std::vector<Tensor> make_tensors(const std::vector<ParamShape>& params) {
  std::vector<Tensor> tensors;
  for (const ParamShape& p : params)
    tensors.push_back({p.name, Floats(static_cast<size_t>(p.elements()))});
  return tensors;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Average of rank+1 over n ranks, stable once every rank holds it.
float expected_average(int size) { return static_cast<float>(size + 1) / 2.0f; }

int64_t count_wrong(const Floats& data, float want) {
  return std::count_if(data.begin(), data.end(), [&](float v) { return v != want; });
}

// Where one step's time went (milliseconds from the step's start).
struct StepTrace {
  std::vector<double> submitted, first_done, last_done, waves;
  void add(Clock::time_point start, Clock::time_point submitted_at,
           const std::vector<Clock::time_point>& done) {
    auto ms = [&](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - start).count();
    };
    submitted.push_back(ms(submitted_at));
    first_done.push_back(ms(done.front()));
    last_done.push_back(ms(done.back()));
    int n = 1;
    for (size_t i = 1; i < done.size(); ++i)
      n += std::chrono::duration<double, std::milli>(done[i] - done[i - 1]).count() > 0.3;
    waves.push_back(n);
  }
};

// The shared-memory data plane called directly, on a segment of its own beside the job's (its
// ranks meet through files in $TMPDIR): null, with the reason, unless the job has 2 or more
// ranks on one host.
std::unique_ptr<hvrun::detail::Backend> raw_shm_backend(const hvrun::Worker& w,
                                                        std::string* why_not) {
  const char* job = std::getenv("HVRUN_JOB_ID");
  if (w.size() < 2 || w.local_size() != w.size() || job == nullptr) {
    *why_not = "the job is not 2 or more ranks on one host started by hvrun";
    return nullptr;
  }
  auto config = hvrun::Config::from_environment();
  if (!config.is_ok()) {
    *why_not = config.status().to_string();
    return nullptr;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/hvrun-gradient-raw-" + job;
  hvrun::bench::DirectoryStore store(dir);
  auto made = hvrun::detail::make_shm_backend(
      {.rank = w.local_rank(),
       .size = w.local_size(),
       .job_id = std::string(job) + "-raw",
       .host = "localhost",
       .chunk_bytes = config->cpu_backend.shm_chunk_bytes,
       .connect_timeout = std::chrono::seconds(60),
       .timeout = std::chrono::seconds(120)},
      store);
  if (!made.is_ok()) {
    *why_not = made.status().to_string();
    return nullptr;
  }
  hvrun::Status met = (*made)->barrier();
  if (w.local_rank() == 0) std::filesystem::remove_all(dir);
  if (!met.is_ok()) {
    *why_not = met.to_string();
    return nullptr;
  }
  return std::move(*made);
}

struct Result {
  std::string name;
  std::function<bool()> run;    // one repetition; false: failed
  std::vector<double> seconds;  // empty: failed
  // Two variants on the same memory take turns in one place of the round, so that each finds
  // it as the other left it a round ago: this one runs in the rounds of this parity (-1: all).
  int parity = -1;
};

// Every variant's warm-ups, then `steps` rounds in which each variant runs once, timed: round
// robin, so that a change in machine load (the host is shared) hits every variant alike.
void time_round_robin(const Flags& f, std::vector<Result>& results) {
  std::vector<bool> failed(results.size(), false);
  for (size_t v = 0; v < results.size(); ++v)
    for (int i = 0; i < f.warmup && !failed[v]; ++i) failed[v] = !results[v].run();
  for (int i = 0; i < f.steps; ++i) {
    for (size_t v = 0; v < results.size(); ++v) {
      if (failed[v] || (results[v].parity >= 0 && i % 2 != results[v].parity)) continue;
      auto start = Clock::now();
      failed[v] = !results[v].run();
      results[v].seconds.push_back(seconds_since(start));
    }
  }
  for (size_t v = 0; v < results.size(); ++v)
    if (failed[v]) results[v].seconds.clear();
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  hvrun::bench::huge_pages() = f.huge_pages;
  if (f.huge_pages) {
    const std::string mode = hvrun::bench::transparent_huge_pages_mode();
    if (mode != "always" && mode != "madvise")
      std::fprintf(stderr, "hvrun_gradient_bench: --huge-pages: transparent huge pages are '%s' "
                   "here, so the buffers stay on 4 KiB pages\n", mode.empty() ? "unknown" : mode.c_str());
  }
  const std::vector<ParamShape> params = read_params(f.params);
  size_t total = 0;
  for (const ParamShape& p : params) total += static_cast<size_t>(p.elements());
  Floats raw_shm_packed(f.reference_first ? total : 0, 0.0f);
  std::vector<Tensor> tensors = make_tensors(params);

  auto init = hvrun::Worker::init();
  if (!init.is_ok()) {
    std::fprintf(stderr, "hvrun_gradient_bench: init: %s\n", init.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **init;
  std::unique_ptr<hvrun::bench::RawGloo> raw;
  if (f.backend == "both") {
    hvrun::bench::RawGlooOptions options;
    std::string error;
    if (!hvrun::bench::RawGloo::options_from_environment(&options, &error) ||
        !(raw = hvrun::bench::RawGloo::connect(options, &error))) {
      std::fprintf(stderr, "hvrun_gradient_bench: %s\n", error.c_str());
      return 1;
    }
  }
  const float fill = static_cast<float>(w.rank() + 1);
  const float want = expected_average(w.size());
  for (Tensor& t : tensors) std::fill(t.data.begin(), t.data.end(), fill);
  Floats packed(total, fill);
  int64_t wrong = 0;
  const hvrun::AllreduceOptions average{.op = hvrun::ReduceOp::kAverage};

  // The shared-memory data plane called directly beside the library (null when the job spans
  // hosts).
  std::string raw_shm_why_not;
  std::unique_ptr<hvrun::detail::Backend> raw_shm;
  if (f.shm_raw) raw_shm = raw_shm_backend(w, &raw_shm_why_not);
  else raw_shm_why_not = f.step_alone ? "--step-alone" : "--no-shm-raw";
  std::vector<std::byte> staging;
  const hvrun::detail::ReduceScaling divide{.divisor = w.size()};

  std::vector<Result> results;
  // The gradient step: every tensor submitted at once (backward order), then all waited for.
  std::vector<hvrun::Handle> handles;
  handles.reserve(tensors.size());
  std::vector<Clock::time_point> done;
  StepTrace trace;
  int step_index = 0;
  results.push_back({"step (161 async allreduce avg)", [&] {
    auto start = Clock::now();
    handles.clear();
    done.clear();
    if (f.mark_steps) w.mark_phase("backward");
    for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
      hvrun::TensorView v{it->data.data(), hvrun::DataType::kFloat32,
                          {static_cast<int64_t>(it->data.size())},
                          f.host_plane_cuda ? hvrun::Device::cuda(0) : hvrun::Device::cpu()};
      handles.push_back(w.allreduce_async(it->name, v, average));
    }
    auto submitted = Clock::now();
    if (f.mark_steps) w.mark_phase("wait");
    bool ok = true;
    for (const hvrun::Handle& h : handles) {
      if (hvrun::Status s = w.wait(h); !s.is_ok()) {
        std::fprintf(stderr, "rank %d: step allreduce failed: %s\n", w.rank(),
                     s.to_string().c_str());
        ok = false;
      }
      if (f.trace) done.push_back(Clock::now());
    }
    if (f.mark_steps) w.mark_step();
    if (f.trace && step_index++ >= f.warmup) trace.add(start, submitted, done);
    return ok;
  }, {}});
  // The same fused Average of the same 161 tensors through the data plane called directly
  // (Backend::allreduce_pieces, what the step's plan executes), taking turns with the step:
  // the step's time over this one is the library's alone. Any other reference sits in other
  // memory, and on this VM where a buffer's pages came from moves a pass over it by up to 8%
  // (bench/RESULTS.md, section 31).
  std::vector<hvrun::detail::ReducePiece> step_pieces;
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it)
    step_pieces.push_back({it->data.data(), it->data.data(), it->data.size()});
  if (raw_shm && f.steps >= 2) {  // taking turns needs two rounds at least
    results.front().parity = 0;
    results.push_back({"161 fused from the tensors avg, shm raw", [&] {
      return raw_shm
          ->allreduce_pieces(step_pieces, hvrun::DataType::kFloat32, hvrun::ReduceOp::kAverage,
                             divide, staging, nullptr)
          .is_ok();
    }, {}, 1});
  }

  // The floor: the same bytes in one packed allreduce.
  hvrun::TensorView packed_view{packed.data(), hvrun::DataType::kFloat32,
                                {static_cast<int64_t>(total)}};
  if (!f.step_alone) results.push_back({"packed allreduce avg, hvrun", [&] {
    return w.allreduce("bench.packed", packed_view, average).is_ok();
  }, {}});
  // The same with Sum, as raw Gloo runs it: separates the cost of Average from the stack's.
  Floats packed_sum(total, 1.0f);
  hvrun::TensorView packed_sum_view{packed_sum.data(), hvrun::DataType::kFloat32,
                                    {static_cast<int64_t>(total)}};
  if (!f.step_alone) results.push_back({"packed allreduce sum, hvrun", [&] {
    return w.allreduce("bench.packed_sum", packed_sum_view).is_ok();
  }, {}});

  // The same packed Average through the shared-memory data plane called directly, in this job
  // (the same threads around it, and its buffer as cold as the step's tensors: every variant's
  // memory was last touched a round ago).
  if (raw_shm) raw_shm_packed.resize(total);  // allocated here unless --reference-first
  else raw_shm_packed.clear();
  std::fill(raw_shm_packed.begin(), raw_shm_packed.end(), fill);
  const hvrun::detail::ReducePiece raw_shm_whole{raw_shm_packed.data(), raw_shm_packed.data(),
                                                 raw_shm_packed.size()};
  if (raw_shm) {
    results.push_back({"packed allreduce avg, shm raw", [&] {
      return raw_shm
          ->allreduce_pieces(std::span<const hvrun::detail::ReducePiece>(&raw_shm_whole, 1),
                             hvrun::DataType::kFloat32, hvrun::ReduceOp::kAverage, divide,
                             staging, nullptr)
          .is_ok();
    }, {}});
  } else if (w.rank() == 0) {
    std::printf("# packed allreduce avg, shm raw: skipped (%s)\n", raw_shm_why_not.c_str());
  }

  // Raw Gloo sums (values double every call: exact in float32 for these few calls); the
  // division Average adds is left out of its floor (about 4 ms for these bytes, measured).
  Floats raw_packed(raw ? total : 0, 1.0f);
  std::vector<Tensor> raw_tensors = raw ? tensors : std::vector<Tensor>{};
  if (raw) {
    results.push_back({"packed allreduce sum, raw gloo", [&] {
      raw->allreduce_sum(raw_packed.data(), raw_packed.size());
      return true;
    }, {}});
    results.push_back({"161 allreduce sum one by one, raw gloo", [&] {
      for (auto it = raw_tensors.rbegin(); it != raw_tensors.rend(); ++it)
        raw->allreduce_sum(it->data.data(), it->data.size());
      return true;
    }, {}});
  }
  time_round_robin(f, results);
  for (const Tensor& t : tensors) wrong += count_wrong(t.data, want);
  if (!f.step_alone) wrong += count_wrong(packed, want);  // reduced only beside the step
  wrong += count_wrong(raw_shm_packed, want);

  if (w.rank() == 0) {
    const char* threshold = std::getenv("HVRUN_FUSION_THRESHOLD");
    std::string label = f.label.empty() ? std::string("fusion threshold ") +
                                              (threshold ? threshold : "default") + " MB"
                                        : f.label;
    if (!f.json)
      std::printf("# hvrun_gradient_bench: %zu tensors, %.1f MiB float32, %d ranks, %d steps after "
                  "%d warm-ups, %s%s\n",
                  tensors.size(), static_cast<double>(total) * 4 / (1 << 20), w.size(), f.steps,
                  f.warmup, label.c_str(), f.huge_pages ? ", buffers on huge pages" : "");
    std::vector<double> rates;
    for (const Result& r : results) {
      if (r.seconds.empty()) {
        std::printf("%s: FAILED\n", r.name.c_str());
        rates.push_back(0);
        continue;
      }
      std::vector<double> per_second;
      for (double s : r.seconds) per_second.push_back(1.0 / s);
      rates.push_back(hvrun::bench::median(per_second));
      hvrun::bench::print_metric(r.name + " [" + label + "]", rates.back(),
                                 hvrun::bench::mean(per_second), "steps/s", f.json);
    }
    auto rate_of = [&](const std::string& name) {
      for (size_t i = 0; i < results.size(); ++i)
        if (results[i].name == name) return rates[i];
      return 0.0;
    };
    auto step_over = [&](const std::string& what, const std::string& name, const char* target) {
      if (const double r = rate_of(name); r > 0)
        hvrun::bench::print_metric("step / " + what + " [" + label + "]", rates[0] / r,
                                   rates[0] / r, "ratio", f.json, target);
    };
    step_over("packed hvrun", "packed allreduce avg, hvrun", "");
    step_over("the same tensors fused, shm raw", "161 fused from the tensors avg, shm raw",
              "the library's cost");
    step_over("packed shm raw", "packed allreduce avg, shm raw", "target >= 0.95");
    step_over("packed raw gloo", "packed allreduce sum, raw gloo", "target >= 0.9");
    if (f.trace) {
      using hvrun::bench::mean;
      using hvrun::bench::median;
      auto show = [&](const char* what, const std::vector<double>& v, const char* unit) {
        hvrun::bench::print_metric(std::string("step trace: ") + what + " [" + label + "]",
                                   median(v), mean(v), unit, f.json);
      };
      show("all 161 submitted", trace.submitted, "ms");
      show("first handle done", trace.first_done, "ms");
      show("last handle done", trace.last_done, "ms");
      show("completion waves", trace.waves, "waves");
    }
    if (wrong) std::printf("# %lld wrong elements\n", static_cast<long long>(wrong));
  }
  (void)w.shutdown();
  return wrong == 0 && !results.front().seconds.empty() ? 0 : 1;
}

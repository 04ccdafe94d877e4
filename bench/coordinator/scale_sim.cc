// bench_coordinator_scale: N simulated ranks against the real coordinator service: the
// `hvrun-coordinator` daemon in a process of its own, over real gRPC on loopback TCP. Every rank
// registers, opens its negotiation stream (the rendezvous), then negotiates a ResNet-50-like step
// (its 161 gradients: full requests in the first step, cache ids after) for --steps steps.
//
//   bench_coordinator_scale [--ranks 64,256,1024] [--steps 20] [--ranks-per-channel 8]
//                           [--params PATH] [--coordinator PATH] [--no-stall] [--gloo-mesh]
//                           [--json]
//
// Per N it prints: the rendezvous time (first Register sent to the last Welcome read) and the
// coordinator's CPU until then (its start included), the first
// step and the steady steps as rank 0 sees them (submit to its last plan), the steady step's
// coordinator latency after the last rank's submission (rank 0's completion less the latest
// submission of the step), the coordinator process's CPU per steady step and its resident
// memory at the end, and the messages and bytes per steady step in each direction (all ranks).
//
// Each rank also sends what a worker sends besides its requests, at a worker's pace: a Heartbeat
// every second and a TelemetryReport (its step timing, its collectives' counters) every 500 ms;
// they are in the per-step counts. Every rank checks that it received the same plans as rank 0.
//
// Unless --no-stall: one more step in which rank 2N/3 submits nothing. The coordinator (started
// with a stall warning after 0.5 s and a stall shutdown after 1 s, autopsies off) must abort the
// job naming that rank, on every rank's stream; the table gives the time from the step's last
// submission to the last rank's JobAbort (stall_abort_s, 1 s of it the shutdown time) and the
// spread of the JobAbort's arrival over the ranks (abort_spread_ms).
//
// With --gloo-mesh, between the rendezvous and the first step: the host leaders' Gloo mesh
// bootstrap through the coordinator's store, Gloo's way and hvrun's (see mesh_phase), each with
// its time, the coordinator's CPU, requests and bytes read (a line per way under the row).
//
// Ranks are threads of this process; `--ranks-per-channel` of them share one gRPC channel (one
// TCP connection, as if they were one host's), so this process does not hold N connections. The
// steps start together (a barrier): on this machine's 2 cores N threads contend with the
// coordinator for CPU, which the rank-0 times include and the coordinator's CPU does not.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/coordinator/step_requests.h"
#include "bench/param_file.h"
#include "worker_lib/backends/gloo/mesh_bootstrap.h"
#include "hvrun.grpc.pb.h"

#ifndef HVRUN_RESNET50_PARAMS
#define HVRUN_RESNET50_PARAMS "bench/data/resnet50_params.txt"
#endif

namespace {

namespace v1 = hvrun::v1;
using Clock = std::chrono::steady_clock;
constexpr char kSecret[] = "bench-scale-secret";

using Tensor = hvrun::bench::ParamShape;

std::atomic<pid_t> g_daemon{-1};  // the running coordinator, killed on failure

// From any thread: the daemon goes, and so does this process, without running destructors
// under threads that still use gRPC.
[[noreturn]] void fail(const std::string& what) {
  if (const pid_t daemon = g_daemon.load(); daemon > 0) ::kill(daemon, SIGKILL);
  std::cerr << "bench_coordinator_scale: " << what << std::endl;
  std::_Exit(1);
}

// The daemon for `ranks` ranks: its pid and the address it printed.
struct Daemon {
  pid_t pid = -1;
  std::string address;
};

Daemon start_daemon(const std::string& path, int ranks, bool stall) {
  int out[2];
  if (::pipe(out) != 0) fail("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    ::setenv("HVRUN_SECRET", kSecret, 1);
    ::dup2(out[1], 1);
    ::close(out[0]);
    if (stall) {  // its stall report and abort: the ranks check them, a terminal need not see them
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, 2);
    }
    const std::string n = std::to_string(ranks);
    // The start and heartbeat limits are far above what any N here takes.
    std::vector<const char*> args = {path.c_str(),         "--world-size", n.c_str(),
                                     "--listen",           "127.0.0.1:0",  "--start-timeout",
                                     "600",                "--heartbeat-timeout", "600",
                                     "--log-level",        stall ? "error" : "warning"};
    if (stall) {
      for (const char* a : {"--stall-check-warning-time-seconds", "0.5",
                            "--stall-check-shutdown-time-seconds", "1", "--autopsy=false"})
        args.push_back(a);
    } else {
      args.push_back("--stall-check=false");
    }
    args.push_back(nullptr);
    ::execv(path.c_str(), const_cast<char* const*>(args.data()));
    ::_exit(127);
  }
  ::close(out[1]);
  g_daemon = pid;
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  if (line.empty()) fail("the coordinator at " + path + " printed no address");
  return {pid, line};
}

// utime + stime of `pid` in seconds (/proc/PID/stat fields 14 and 15).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double resident_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

struct RankCounts {
  uint64_t sent_messages = 0, sent_bytes = 0, received_messages = 0, received_bytes = 0;
};

struct Shared {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const std::vector<Tensor>* tensors = nullptr;
  int ranks = 0;
  int steps = 0;
  std::unique_ptr<std::barrier<>> step_barrier;
  std::atomic<int64_t> welcomed{0};              // ranks with their Welcome
  std::atomic<int64_t> last_welcome_ns{0};       // since t0
  std::vector<std::atomic<int64_t>> last_submit_ns;  // per step, the latest submission
  std::vector<double> rank0_us;                 // per step, rank 0's submit to done
  std::vector<int64_t> rank0_done_ns;           // per step
  std::vector<RankCounts> counts;               // per rank, steady steps only
  std::vector<std::vector<uint64_t>> plan_digest;  // per rank, per step: of the plans' bytes
  bool stall = true;
  int stalled_rank = -1;
  std::atomic<int64_t> stall_submitted_ns{0};  // the stall step's latest submission
  std::atomic<int64_t> first_abort_ns{0}, last_abort_ns{0};
  Clock::time_point t0;
  pid_t daemon = -1;
  double rendezvous_cpu = 0;  // the coordinator's CPU from its start to the last Welcome
  double cpu_before = 0, cpu_after = 0;
  double rss_mib = 0;  // the coordinator's, after the last step
  bool gloo_mesh = false;  // --gloo-mesh: the leaders' mesh bootstrap, both ways (below)
  struct MeshWay {
    bool ran = false;
    Clock::time_point start, end;
    double cpu_before = 0, cpu_after = 0;
    std::atomic<uint64_t> requests{0}, bytes_read{0};
  } mesh[3];  // Gloo's connectFullMesh, hvrun's mesh bootstrap, hvrun's on a sparse mesh
};

int64_t since(const Shared& s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s.t0).count();
}

void raise_to(std::atomic<int64_t>& latest, int64_t value) {
  for (int64_t seen = latest.load(); value > seen;)
    if (latest.compare_exchange_weak(seen, value)) break;
}

void lower_to(std::atomic<int64_t>& earliest, int64_t value) {
  for (int64_t seen = earliest.load(); seen == 0 || value < seen;)
    if (earliest.compare_exchange_weak(seen, value)) break;
}

// FNV-1a over `bytes`, continuing from `digest`.
uint64_t digest_of(uint64_t digest, const std::string& bytes) {
  for (unsigned char c : bytes) digest = (digest ^ c) * 1099511628211ULL;
  return digest;
}

// What a worker sends now and then besides its requests (see the top of the file).
struct Background {
  Clock::time_point last_heartbeat = Clock::now();
  Clock::time_point last_report = Clock::now();
  uint64_t tensors_done = 0;
  uint64_t responses_done = 0;
};

void send_background(Background& b, uint64_t step, uint64_t last_plan_seq, int64_t step_ns,
                     grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>& stream,
                     RankCounts* counts) {
  const auto now = Clock::now();
  std::vector<v1::WorkerMessage> out;
  if (now - b.last_heartbeat >= std::chrono::seconds(1)) {
    b.last_heartbeat = now;
    out.emplace_back().mutable_heartbeat()->set_last_plan_seq(last_plan_seq);
  }
  if (now - b.last_report >= std::chrono::milliseconds(500)) {
    b.last_report = now;
    v1::TelemetryReport* report = out.emplace_back().mutable_telemetry();
    report->set_steps(step);
    report->set_sent_unix_us(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
    v1::StepTiming* timing = report->add_step_timings();
    timing->set_step(step);
    timing->set_duration_ns(static_cast<uint64_t>(step_ns));
    timing->set_blocked_ns(static_cast<uint64_t>(step_ns));
    v1::CollectiveStats* stats = report->add_collectives();
    stats->set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    stats->set_backend("gloo");
    stats->set_tensors(b.tensors_done);
    stats->set_responses(b.responses_done);
  }
  for (const v1::WorkerMessage& m : out) {
    if (!stream.Write(m)) fail("a heartbeat or telemetry write failed");
    if (counts) {
      ++counts->sent_messages;
      counts->sent_bytes += m.ByteSizeLong();
    }
  }
}

// --gloo-mesh: the Gloo mesh among host leaders (every 8th rank, as the hierarchical data plane
// connects across hosts of 8), its pair addresses exchanged through the coordinator's store:
// as Gloo's connectFullMesh asks (each leader sets one key holding an address per peer, then for
// each peer waits for its key and reads it: both return the whole value); as hvrun's mesh
// bootstrap does for a full mesh (worker_lib/backends/gloo/mesh_bootstrap.h: one KvSet of an
// address per peer, one KvGet of the addresses meant for it; a Gloo-only job's mesh); and as it
// does for the leaders' sparse mesh (the same, with the peers 2^k apart only). Each way runs
// between two barriers of every rank; rank 0 reads the time and the coordinator's CPU.
constexpr int kRanksPerHost = 8;
constexpr size_t kPairAddressBytes = 136;  // a Gloo TCP pair's address as Gloo serializes it
constexpr int kGlooWayMostLeaders = 128;   // beyond, its N^3 bytes take minutes on this machine

int mesh_leaders(int ranks) { return (ranks + kRanksPerHost - 1) / kRanksPerHost; }

template <typename Context>
void kv_set(v1::Coordinator::Stub& stub, const Context& context, const v1::KvSetRequest& request) {
  auto ctx = context();
  v1::KvSetResponse response;
  if (grpc::Status st = stub.KvSet(ctx.get(), request, &response); !st.ok())
    fail("KvSet: " + st.error_message());
}

template <typename Context>
void kv_get(v1::Coordinator::Stub& stub, const Context& context,
            const std::vector<std::string>& keys, Shared::MeshWay& way) {
  v1::KvGetRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(600000);
  auto ctx = context();
  v1::KvGetResponse response;
  if (grpc::Status st = stub.KvGet(ctx.get(), request, &response); !st.ok())
    fail("KvGet: " + st.error_message());
  way.requests += 1;
  for (const auto& value : response.values()) way.bytes_read += value.size();
}

template <typename Context>
void mesh_phase(Shared& s, int rank, v1::Coordinator::Stub& stub, const Context& context) {
  const int leaders = mesh_leaders(s.ranks);
  const int me = rank / kRanksPerHost;
  const bool leader = rank % kRanksPerHost == 0 && leaders > 1;
  auto key = [](const char* way, int from, int to) {
    return std::string(way) + "/" + std::to_string(from) + (to < 0 ? "" : "/" + std::to_string(to));
  };
  for (int w = 0; w < 3; ++w) {
    const bool gloo_way = w == 0;
    if (gloo_way && leaders > kGlooWayMostLeaders) continue;  // every rank alike
    Shared::MeshWay& way = s.mesh[w];
    s.step_barrier->arrive_and_wait();
    if (rank == 0) {
      way.ran = true;
      way.cpu_before = cpu_seconds(s.daemon);
      way.start = Clock::now();
    }
    if (leader && gloo_way) {
      v1::KvSetRequest mine;
      mine.set_key(key("gloo-mesh", me, -1));
      mine.set_value(std::string(kPairAddressBytes * static_cast<size_t>(leaders - 1), 'a'));
      kv_set(stub, context, mine);
      way.requests += 1;
      for (int p = 0; p < leaders; ++p) {
        if (p == me) continue;
        kv_get(stub, context, {key("gloo-mesh", p, -1)}, way);  // wait
        kv_get(stub, context, {key("gloo-mesh", p, -1)}, way);  // get
      }
    } else if (leader) {
      const char* prefix = w == 1 ? "hvrun-mesh" : "hvrun-sparse-mesh";
      v1::KvSetRequest mine;
      std::vector<std::string> theirs;
      for (int p : hvrun::detail::mesh_peers(me, leaders, /*sparse=*/w == 2)) {
        v1::KvEntry* entry = mine.key().empty() ? nullptr : mine.add_more();
        const std::string k = key(prefix, me, p);
        const std::string address(kPairAddressBytes, 'a');
        if (entry == nullptr) {
          mine.set_key(k);
          mine.set_value(address);
        } else {
          entry->set_key(k);
          entry->set_value(address);
        }
        theirs.push_back(key(prefix, p, me));
      }
      kv_set(stub, context, mine);
      way.requests += 1;
      kv_get(stub, context, theirs, way);
    }
    s.step_barrier->arrive_and_wait();
    if (rank == 0) {
      way.end = Clock::now();
      way.cpu_after = cpu_seconds(s.daemon);
    }
  }
}

void run_rank(Shared& s, int rank) {
  auto stub = v1::Coordinator::NewStub(
      s.channels[static_cast<size_t>(rank) % s.channels.size()]);
  auto context = [] {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("x-hvrun-secret", kSecret);
    ctx->set_wait_for_ready(true);  // as workers do: a connection still being made is no error
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    return ctx;
  };
  v1::RegisterRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.mutable_worker()->set_host("simhost" + std::to_string(rank / 8));
  request.mutable_worker()->set_requested_rank(rank);
  request.mutable_worker()->set_pid(getpid());
  v1::RegisterResponse registered;
  auto reg_ctx = context();
  if (grpc::Status st = stub->Register(reg_ctx.get(), request, &registered); !st.ok())
    fail("rank " + std::to_string(rank) + ": Register: " + st.error_message());
  auto stream_ctx = context();
  auto stream = stub->Negotiate(stream_ctx.get());
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(rank);
  v1::CoordinatorMessage in;
  if (!stream->Write(hello) || !stream->Read(&in) || !in.has_welcome())
    fail("rank " + std::to_string(rank) + ": no Welcome");
  if (s.welcomed.fetch_add(1) + 1 == s.ranks) s.rendezvous_cpu = cpu_seconds(s.daemon);
  raise_to(s.last_welcome_ns, since(s));
  if (s.gloo_mesh) mesh_phase(s, rank, *stub, context);

  const std::vector<Tensor>& tensors = *s.tensors;
  std::map<std::string, uint32_t> ids;
  RankCounts& counts = s.counts[static_cast<size_t>(rank)];
  Background background;
  uint64_t last_plan_seq = 0;
  std::vector<uint64_t>& digests = s.plan_digest[static_cast<size_t>(rank)];
  for (int step = 0; step < s.steps; ++step) {
    if (step == 1 && rank == 0) s.cpu_before = cpu_seconds(s.daemon);
    s.step_barrier->arrive_and_wait();
    const v1::WorkerMessage out = hvrun::bench::step_requests(tensors, ids);
    const bool steady = step > 0;
    const auto start = Clock::now();
    raise_to(s.last_submit_ns[static_cast<size_t>(step)], since(s));
    if (!stream->Write(out)) fail("rank " + std::to_string(rank) + ": write failed");
    if (steady) {
      ++counts.sent_messages;
      counts.sent_bytes += out.ByteSizeLong();
    }
    size_t done = 0;
    uint64_t digest = 1469598103934665603ULL;
    while (done < tensors.size()) {
      if (!stream->Read(&in)) fail("rank " + std::to_string(rank) + ": stream ended");
      if (steady) {
        ++counts.received_messages;
        counts.received_bytes += in.ByteSizeLong();
      }
      if (!in.has_plan()) continue;  // timeline state, hosts updated: not this bench's
      digest = digest_of(digest, in.plan().SerializeAsString());
      last_plan_seq = in.plan().seq();
      background.responses_done += static_cast<uint64_t>(in.plan().responses_size());
      for (const auto& response : in.plan().responses()) {
        if (!response.error().empty()) fail(response.error());
        background.tensors_done += static_cast<uint64_t>(response.tensors_size());
        for (const auto& t : response.tensors()) {
          if (!t.name().empty()) ids[t.name()] = t.cache_id();  // as_cached: name left out
          ++done;
        }
      }
    }
    digests.push_back(digest);
    if (rank == 0) {
      s.rank0_us[static_cast<size_t>(step)] =
          std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      s.rank0_done_ns[static_cast<size_t>(step)] = since(s);
    }
    send_background(background, static_cast<uint64_t>(step + 1), last_plan_seq,
                    std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start)
                        .count(),
                    *stream, steady ? &counts : nullptr);
  }
  s.step_barrier->arrive_and_wait();
  if (rank == 0) {
    s.cpu_after = cpu_seconds(s.daemon);
    s.rss_mib = resident_mib(s.daemon);
  }
  if (s.stall) {
    // Every rank but one submits the step again (cache ids); all must get the coordinator's
    // abort naming the one.
    if (rank != s.stalled_rank) {
      v1::WorkerMessage again;
      for (const Tensor& t : tensors) again.mutable_requests()->add_cached_ids(ids.at(t.name));
      raise_to(s.stall_submitted_ns, since(s));
      if (!stream->Write(again)) fail("rank " + std::to_string(rank) + ": write failed");
    }
    bool aborted = false;
    while (!aborted && stream->Read(&in)) {
      if (in.has_plan()) fail("rank " + std::to_string(rank) + ": a plan came without rank " +
                              std::to_string(s.stalled_rank) + "'s requests");
      if (!in.has_abort()) continue;
      aborted = true;
      const int64_t arrived = since(s);
      raise_to(s.last_abort_ns, arrived);
      lower_to(s.first_abort_ns, arrived);
      const std::string named = "rank " + std::to_string(s.stalled_rank);
      if (in.abort().reason().find(named) == std::string::npos)
        fail("rank " + std::to_string(rank) + ": the stall's abort does not name " + named +
             ": " + in.abort().reason());
    }
    if (!aborted) fail("rank " + std::to_string(rank) + ": the stream ended without a JobAbort");
    stream->WritesDone();
    stream->Finish();
    return;
  }
  v1::WorkerMessage bye;
  bye.mutable_goodbye();
  stream->Write(bye);
  stream->WritesDone();
  while (stream->Read(&in)) {
  }
  stream->Finish();
}

// One column of the table and key of the JSON line; a negative value is "no figure" (the
// table prints "-", JSON -1).
struct Column {
  const char* name;
  int width;
  int decimals;
  double value = 0;
};

std::vector<Column> columns() {
  return {{"ranks", 6, 0},         {"rendezvous_s", 12, 3}, {"rdv_cpu_ms", 11, 1},
          {"first_ms", 12, 2},     {"steady_ms", 12, 2},    {"after_last_ms", 14, 2},
          {"coord_cpu_ms", 12, 2}, {"rss_mib", 9, 1},       {"msgs_in", 10, 1},
          {"bytes_in", 12, 0},     {"msgs_out", 10, 1},     {"bytes_out", 12, 0},
          {"stall_abort_s", 14, 3}, {"abort_spread_ms", 15, 2}};
}

std::string formatted(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string formatted(const char* format, ...) {
  char text[128];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

// The table's header line: every column's name, right-aligned to its width.
std::string header_line() {
  std::string line;
  for (const Column& c : columns())
    line += (line.empty() ? "" : " ") + formatted("%*s", c.width, c.name);
  return line;
}

void print_row(const std::vector<Column>& row, bool json) {
  std::string line;
  for (const Column& c : row) {
    const std::string value = c.value < 0 ? std::string(json ? "-1" : "-")
                                          : formatted("%.*f", c.decimals, c.value);
    if (json)
      line += (line.empty() ? "{\"" : ", \"") + std::string(c.name) + "\": " + value;
    else
      line += (line.empty() ? "" : " ") + formatted("%*s", c.width, value.c_str());
  }
  std::printf("%s%s\n", line.c_str(), json ? "}" : "");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string default_coordinator() {
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + "hvrun-coordinator";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> rank_counts = {64, 256, 1024};
  int steps = 20;
  int per_channel = 8;
  bool json = false;
  bool stall = true;
  bool gloo_mesh = false;
  std::string params_path = HVRUN_RESNET50_PARAMS;
  std::string coordinator = default_coordinator();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ranks") {
      rank_counts.clear();
      std::stringstream parts(value());
      for (std::string item; std::getline(parts, item, ',');) rank_counts.push_back(std::stoi(item));
    } else if (arg == "--steps") {
      steps = std::max(3, std::stoi(value()));
    } else if (arg == "--ranks-per-channel") {
      per_channel = std::max(1, std::stoi(value()));
    } else if (arg == "--params") {
      params_path = value();
    } else if (arg == "--coordinator") {
      coordinator = value();
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--no-stall") {
      stall = false;
    } else if (arg == "--gloo-mesh") {
      gloo_mesh = true;
    } else {
      fail("usage: bench_coordinator_scale [--ranks 64,256,1024] [--steps N] "
           "[--ranks-per-channel N] [--params PATH] [--coordinator PATH] [--no-stall] "
           "[--gloo-mesh] [--json]");
    }
  }
  const std::vector<Tensor> tensors =
      hvrun::bench::read_param_file(params_path).value_or(std::vector<Tensor>{});
  if (tensors.empty()) fail("cannot read " + params_path + " (pass --params PATH)");
  ::signal(SIGPIPE, SIG_IGN);

  if (!json)
    std::printf("# hvrun-coordinator (its own process) and N simulated ranks (threads, %d per "
                "gRPC channel) over loopback TCP; %zu tensors per step, %d steps (the first "
                "negotiates, the rest are cached)\n",
                per_channel, tensors.size(), steps);
  if (!json) std::printf("%s\n", header_line().c_str());
  for (int ranks : rank_counts) {
    const Daemon daemon = start_daemon(coordinator, ranks, stall && ranks > 1);
    Shared s;
    s.tensors = &tensors;
    s.ranks = ranks;
    s.steps = steps;
    s.daemon = daemon.pid;
    s.step_barrier = std::make_unique<std::barrier<>>(ranks);
    s.last_submit_ns = std::vector<std::atomic<int64_t>>(static_cast<size_t>(steps));
    s.rank0_us.assign(static_cast<size_t>(steps), 0);
    s.rank0_done_ns.assign(static_cast<size_t>(steps), 0);
    s.counts.assign(static_cast<size_t>(ranks), {});
    s.plan_digest.assign(static_cast<size_t>(ranks), {});
    s.stall = stall && ranks > 1;
    s.gloo_mesh = gloo_mesh;
    s.stalled_rank = ranks * 2 / 3;
    for (int c = 0; c < (ranks + per_channel - 1) / per_channel; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", c);  // distinct channels: one connection each
      s.channels.push_back(grpc::CreateCustomChannel(
          daemon.address, grpc::InsecureChannelCredentials(), args));
    }
    s.t0 = Clock::now();
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) threads.emplace_back([&s, r] { run_rank(s, r); });
    for (auto& t : threads) t.join();
    int status = 0;
    ::waitpid(daemon.pid, &status, 0);
    g_daemon = -1;

    for (int r = 1; r < ranks; ++r)
      if (s.plan_digest[static_cast<size_t>(r)] != s.plan_digest[0])
        fail("rank " + std::to_string(r) + " received other plans than rank 0 (" +
             std::to_string(ranks) + " ranks)");
    std::vector<double> steady, after_last;
    for (int k = 1; k < steps; ++k) {
      steady.push_back(s.rank0_us[static_cast<size_t>(k)] / 1000.0);
      after_last.push_back(
          static_cast<double>(s.rank0_done_ns[static_cast<size_t>(k)] -
                              s.last_submit_ns[static_cast<size_t>(k)].load()) / 1e6);
    }
    RankCounts total;
    for (const RankCounts& c : s.counts) {
      total.sent_messages += c.sent_messages;
      total.sent_bytes += c.sent_bytes;
      total.received_messages += c.received_messages;
      total.received_bytes += c.received_bytes;
    }
    const double per_step = static_cast<double>(steps - 1);
    const double cpu_ms = (s.cpu_after - s.cpu_before) * 1000.0 / per_step;
    const double rendezvous = static_cast<double>(s.last_welcome_ns.load()) / 1e9;
    // Without the stall phase there is no stall figure (-1: "-" in the table, -1 in JSON).
    const double stall_abort =
        s.stall ? static_cast<double>(s.last_abort_ns - s.stall_submitted_ns) / 1e9 : -1;
    const double abort_spread =
        s.stall ? static_cast<double>(s.last_abort_ns - s.first_abort_ns) / 1e6 : -1;
    std::vector<Column> row = columns();
    const double values[] = {static_cast<double>(ranks),
                             rendezvous,
                             s.rendezvous_cpu * 1000.0,
                             s.rank0_us[0] / 1000.0,
                             median(steady),
                             median(after_last),
                             cpu_ms,
                             s.rss_mib,
                             total.sent_messages / per_step,
                             total.sent_bytes / per_step,
                             total.received_messages / per_step,
                             total.received_bytes / per_step,
                             stall_abort,
                             abort_spread};
    static_assert(std::size(values) == 14);
    for (size_t i = 0; i < row.size(); ++i) row[i].value = values[i];
    print_row(row, json);
    for (int w = 0; s.gloo_mesh && w < 3; ++w) {
      const Shared::MeshWay& way = s.mesh[w];
      const char* name = w == 0 ? "gloo" : w == 1 ? "hvrun" : "hvrun sparse";
      const int leaders = mesh_leaders(ranks);
      if (!way.ran) {
        if (!json)
          std::printf("  leaders' mesh, %d leaders, %-12s  - (over %d leaders: N^3 bytes)\n",
                      leaders, name, kGlooWayMostLeaders);
        continue;
      }
      const double seconds = std::chrono::duration<double>(way.end - way.start).count();
      const double way_cpu_ms = (way.cpu_after - way.cpu_before) * 1000.0;
      const double mib = static_cast<double>(way.bytes_read.load()) / (1 << 20);
      if (json)
        std::printf("{\"kind\": \"gloo_mesh\", \"ranks\": %d, \"leaders\": %d, \"way\": \"%s\", "
                    "\"seconds\": %.4f, \"coord_cpu_ms\": %.1f, \"requests\": %llu, "
                    "\"mib_read\": %.3f}\n",
                    ranks, leaders, name, seconds, way_cpu_ms,
                    static_cast<unsigned long long>(way.requests.load()), mib);
      else
        std::printf("  leaders' mesh, %d leaders, %-12s %8.3f s %10.1f coordinator CPU ms "
                    "%9llu requests %11.3f MiB read\n",
                    leaders, name, seconds, way_cpu_ms,
                    static_cast<unsigned long long>(way.requests.load()), mib);
    }
    std::fflush(stdout);
    // After the stall the coordinator ends the job as failed: it must still exit by itself.
    if (!WIFEXITED(status) || (!s.stall && WEXITSTATUS(status) != 0))
      fail("the coordinator for " + std::to_string(ranks) + " ranks did not end cleanly");
  }
  return 0;
}

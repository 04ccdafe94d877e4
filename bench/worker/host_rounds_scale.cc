// bench_host_rounds_scale: the steady step of a multi-host job aggregated per host, at scale.
// With cross-host rounds (worker_lib/agreement/host_rounds/host_rounds.h) each host's ranks
// agree on their shm board and one speaker per host reports to the round arbiter, which answers
// every host; the coordinator sees no request. This runs the real RoundArbiter in a process of
// its own (as it runs on rank 0's process, beside nothing else here) against N / --ranks-per-host
// simulated host speakers over real TCP on loopback, and reports per N:
//
//   hosts            the arbiter's peers (N / ranks per host)
//   round_us         median time from the last host's report to the last host's verdict
//   round_p90_us     its 90th percentile
//   whole_round_us   median time from the first report to the last verdict (this process sends
//                    the hosts' reports one after another: on real hosts they go in parallel)
//   cpu_us           the arbiter process's CPU per round (CLOCK_PROCESS_CPUTIME_ID, its own)
//   kib_per_round    bytes on the wire per round, both ways (headers and bit vectors)
//   refusal_us       a round in which one host refuses first: its last verdict after the last
//                    report (every other host must hear kFailed at once)
//   silent_ms        a round in which one host never reports: the others' verdicts (kFailed)
//                    after the arbiter's wait (--wait-ms)
//   rss_mib          the arbiter process's resident memory at the end
//
//   bench_host_rounds_scale [--ranks 64,256,1024,4096] [--ranks-per-host 8] [--rounds 300]
//                           [--wait-ms 200] [--json]
//
// Every verdict is checked (outcome and the AND of the hosts' bit vectors); a wrong one exits 1.
// The hosts' own board rounds are not simulated: their cost does not grow with N.
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "worker_lib/agreement/host_rounds/round_arbiter.h"
#include "worker_lib/agreement/host_rounds/round_link.h"

namespace {

using hvrun::detail::RoundKey;
using hvrun::detail::RoundOutcome;
using hvrun::detail::agreement::kMaxRoundData;
using hvrun::detail::agreement::RoundArbiter;
using hvrun::detail::agreement::RoundLink;
using hvrun::detail::agreement::RoundMessage;
using hvrun::detail::agreement::RoundMessageKind;
using Clock = std::chrono::steady_clock;

constexpr size_t kBits = 512;  // bytes: the cached rounds' bit vector (4,096 cache ids)

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "bench_host_rounds_scale: " << what << std::endl;
  std::_Exit(1);
}

struct Flags {
  std::vector<int> ranks = {64, 256, 1024, 4096};
  int ranks_per_host = 8;
  int rounds = 300;
  int wait_ms = 200;
  bool json = false;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& text) {
      char* end = nullptr;
      const long v = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < 1) fail(a + " needs integers >= 1, got " + text);
      return static_cast<int>(v);
    };
    if (a == "--ranks") {
      f.ranks.clear();
      std::stringstream list(value());
      for (std::string one; std::getline(list, one, ',');) f.ranks.push_back(number(one));
    } else if (a == "--ranks-per-host") {
      f.ranks_per_host = number(value());
    } else if (a == "--rounds") {
      f.rounds = number(value());
    } else if (a == "--wait-ms") {
      f.wait_ms = number(value());
    } else if (a == "--json") {
      f.json = true;
    } else {
      fail("unknown flag " + a + "\nusage: bench_host_rounds_scale [--ranks 64,256,1024,4096] "
           "[--ranks-per-host 8] [--rounds 300] [--wait-ms 200] [--json]");
    }
  }
  return f;
}

// The arbiter in a child process: it prints its address on `to_parent`, then answers 'c' on
// `from_parent` with its CPU time in ns and leaves on 'q' (or end of file).
struct ArbiterProcess {
  pid_t pid = -1;
  int commands = -1;  // write end
  int answers = -1;   // read end
  std::string address;

  static ArbiterProcess start(int hosts, std::chrono::milliseconds wait) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) fail("pipe");
    const pid_t pid = ::fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
      ::close(down[1]);
      ::close(up[0]);
      auto arbiter = RoundArbiter::start("127.0.0.1", hosts, wait);
      if (!arbiter.is_ok()) fail(arbiter.status().message());
      std::string line = (*arbiter)->address() + "\n";
      if (::write(up[1], line.data(), line.size()) < 0) std::_Exit(1);
      char command = 0;
      while (::read(down[0], &command, 1) == 1 && command == 'c') {
        timespec cpu{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        const int64_t ns = static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec;
        if (::write(up[1], &ns, sizeof ns) < 0) break;
      }
      std::_Exit(0);  // the arbiter's thread is still running: no destructors
    }
    ::close(down[0]);
    ::close(up[1]);
    ArbiterProcess p{pid, down[1], up[0], ""};
    char c = 0;
    while (::read(p.answers, &c, 1) == 1 && c != '\n') p.address += c;
    if (p.address.empty()) fail("the arbiter process did not start");
    return p;
  }
  int64_t cpu_ns() const {
    if (::write(commands, "c", 1) != 1) fail("arbiter process gone");
    int64_t ns = 0;
    if (::read(answers, &ns, sizeof ns) != sizeof ns) fail("arbiter process gone");
    return ns;
  }
  double rss_mib() const {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
    return 0;
  }
  void stop() {
    [[maybe_unused]] ssize_t n = ::write(commands, "q", 1);
    ::close(commands);
    ::close(answers);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

// The simulated hosts' speakers: one link each, read through one epoll set.
class Hosts {
 public:
  Hosts(const std::string& address, int hosts) : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
    for (int h = 0; h < hosts; ++h) {
      auto link = RoundLink::connect(address, std::chrono::milliseconds(10000));
      if (!link.is_ok()) fail(link.status().message());
      RoundMessage hello;
      hello.value = static_cast<uint32_t>(h);
      if (!(*link)->send(hello, nullptr).is_ok()) fail("hello");
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u32 = static_cast<uint32_t>(h);
      ::epoll_ctl(epoll_, EPOLL_CTL_ADD, (*link)->fd(), &e);
      links_.push_back(std::move(link).value());
    }
  }
  ~Hosts() { ::close(epoll_); }
  int size() const { return static_cast<int>(links_.size()); }

  // Host h's bits: every bit but bit h; the AND is every bit but bits 0..hosts-1.
  static void bits_of(int h, std::byte* out) {
    std::memset(out, 0xff, kBits);
    out[h / 8] &= static_cast<std::byte>(~(1u << (h % 8)));
  }
  void report(int h, uint32_t gen, bool agreed) {
    RoundMessage m;
    m.kind = agreed ? RoundMessageKind::kAgreed : RoundMessageKind::kFailed;
    m.gen = gen;
    m.key.words[0] = 0x8000000000000008ull;
    m.key.words[1] = gen;
    std::byte bits[kBits];
    bits_of(h, bits);
    m.bytes = agreed ? static_cast<uint32_t>(kBits) : 0;
    if (!links_[static_cast<size_t>(h)]->send(m, bits).is_ok()) fail("report");
  }
  // Waits for `gen`'s verdict on every host in `expected_from`, each `want`; checks the AND.
  void verdicts(uint32_t gen, const std::vector<int>& expected_from, RoundOutcome want) {
    std::vector<char> got(links_.size(), 0);
    size_t left = expected_from.size();
    std::byte expected[kBits];
    std::memset(expected, 0xff, kBits);
    for (int h = 0; h < size(); ++h) expected[h / 8] &= static_cast<std::byte>(~(1u << (h % 8)));
    epoll_event ready[256];
    while (left > 0) {
      const int n = ::epoll_wait(epoll_, ready, 256, 30000);
      if (n <= 0) fail("no verdict for round " + std::to_string(gen) + " within 30 s");
      for (int i = 0; i < n; ++i) {
        const uint32_t h = ready[i].data.u32;
        RoundMessage m;
        std::byte data[kMaxRoundData];
        if (!links_[h]->receive(m, data).is_ok()) fail("link of host " + std::to_string(h));
        if (m.kind != RoundMessageKind::kVerdict || m.gen != gen || got[h])
          fail("host " + std::to_string(h) + ": unexpected message for round " +
               std::to_string(m.gen));
        if (static_cast<RoundOutcome>(m.value) != want)
          fail("round " + std::to_string(gen) + ": host " + std::to_string(h) + " heard " +
               hvrun::detail::round_outcome_name(static_cast<RoundOutcome>(m.value)));
        if (want == RoundOutcome::kAgreed &&
            (m.bytes != kBits || std::memcmp(data, expected, kBits) != 0))
          fail("round " + std::to_string(gen) + ": host " + std::to_string(h) + " got a wrong AND");
        got[h] = 1;
        --left;
      }
    }
  }

 private:
  int epoll_;
  std::vector<std::unique_ptr<RoundLink>> links_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}
double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

struct Row {
  int ranks = 0, hosts = 0, rounds = 0;
  double round_us = 0, round_p90_us = 0, whole_round_us = 0, cpu_us = 0, kib_per_round = 0;
  double refusal_us = 0, silent_ms = 0, rss_mib = 0;
};

Row run(const Flags& f, int ranks) {
  Row row;
  row.ranks = ranks;
  row.hosts = std::max(2, (ranks + f.ranks_per_host - 1) / f.ranks_per_host);
  row.rounds = f.rounds;
  ArbiterProcess arbiter = ArbiterProcess::start(row.hosts, std::chrono::milliseconds(f.wait_ms));
  Hosts hosts(arbiter.address, row.hosts);
  std::vector<int> everyone(static_cast<size_t>(row.hosts));
  for (int h = 0; h < row.hosts; ++h) everyone[static_cast<size_t>(h)] = h;

  uint32_t gen = 1;
  auto agreed_round = [&](std::vector<double>* after_last, std::vector<double>* whole) {
    const auto start = Clock::now();
    for (int h = 0; h < row.hosts; ++h) hosts.report(h, gen, true);
    const auto sent = Clock::now();
    hosts.verdicts(gen, everyone, RoundOutcome::kAgreed);
    if (after_last) after_last->push_back(us_since(sent));
    if (whole) whole->push_back(us_since(start));
    ++gen;
  };
  for (int i = 0; i < 20; ++i) agreed_round(nullptr, nullptr);  // warm-up
  std::vector<double> after_last, whole;
  const int64_t cpu_before = arbiter.cpu_ns();
  for (int i = 0; i < f.rounds; ++i) agreed_round(&after_last, &whole);
  const int64_t cpu_after = arbiter.cpu_ns();
  row.round_us = median(after_last);
  row.round_p90_us = percentile(after_last, 0.9);
  row.whole_round_us = median(whole);
  row.cpu_us = static_cast<double>(cpu_after - cpu_before) / 1000.0 / f.rounds;
  row.kib_per_round = static_cast<double>(row.hosts) *
                      (2 * (sizeof(RoundMessage) + kBits)) / 1024.0;

  // One host refuses first: everyone else must hear kFailed, none wait for the arbiter's wait.
  {
    const int refuser = row.hosts / 2;
    hosts.report(refuser, gen, false);
    std::vector<int> others;
    for (int h = 0; h < row.hosts; ++h)
      if (h != refuser) others.push_back(h);
    const auto start = Clock::now();
    for (int h : others) hosts.report(h, gen, true);
    const auto sent = Clock::now();
    hosts.verdicts(gen, others, RoundOutcome::kFailed);
    row.refusal_us = us_since(sent);
    if (us_since(start) > f.wait_ms * 1000.0 / 2) fail("a refusal waited for the arbiter's wait");
    ++gen;
  }
  // The last host never reports: the others hear kFailed at the arbiter's wait.
  {
    std::vector<int> others(everyone.begin(), everyone.end() - 1);
    const auto start = Clock::now();
    for (int h : others) hosts.report(h, gen, true);
    hosts.verdicts(gen, others, RoundOutcome::kFailed);
    row.silent_ms = us_since(start) / 1000.0;
    if (row.silent_ms < f.wait_ms * 0.95) fail("a silent host's round failed before the wait");
    ++gen;
  }
  // And the late host hears the recorded verdict.
  hosts.report(row.hosts - 1, gen - 1, true);
  hosts.verdicts(gen - 1, {row.hosts - 1}, RoundOutcome::kFailed);
  row.rss_mib = arbiter.rss_mib();
  arbiter.stop();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  std::vector<Row> rows;
  for (int n : f.ranks) rows.push_back(run(f, n));
  if (f.json) {
    std::cout << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("%s{\"ranks\": %d, \"hosts\": %d, \"rounds\": %d, \"round_us\": %.1f, "
                  "\"round_p90_us\": %.1f, \"whole_round_us\": %.1f, \"cpu_us\": %.1f, "
                  "\"kib_per_round\": %.1f, \"refusal_us\": %.1f, \"silent_ms\": %.1f, "
                  "\"rss_mib\": %.1f}",
                  i ? ", " : "", r.ranks, r.hosts, r.rounds, r.round_us, r.round_p90_us,
                  r.whole_round_us, r.cpu_us, r.kib_per_round, r.refusal_us, r.silent_ms,
                  r.rss_mib);
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("# cross-host rounds: the round arbiter against N/%d host speakers (loopback TCP)\n",
              f.ranks_per_host);
  std::printf("%7s %6s %7s %9s %13s %15s %7s %14s %11s %10s %8s\n", "ranks", "hosts", "rounds",
              "round_us", "round_p90_us", "whole_round_us", "cpu_us", "kib_per_round",
              "refusal_us", "silent_ms", "rss_mib");
  for (const Row& r : rows)
    std::printf("%7d %6d %7d %9.1f %13.1f %15.1f %7.1f %14.1f %11.1f %10.1f %8.1f\n", r.ranks,
                r.hosts, r.rounds, r.round_us, r.round_p90_us, r.whole_round_us, r.cpu_us,
                r.kib_per_round, r.refusal_us, r.silent_ms, r.rss_mib);
  return 0;
}

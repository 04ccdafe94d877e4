#include "launcher/telemetry/telemetry_summary.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <numeric>
#include <sstream>

namespace hvrun::launcher {
namespace {

using coordinator::telemetry::CollectiveTotals;
using coordinator::telemetry::JobTelemetry;
using coordinator::telemetry::RankTelemetry;

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string seconds_text(double s) { return s < 10 ? fixed(s, 3) + " s" : fixed(s, 1) + " s"; }

std::string ms_text(double s) { return fixed(s * 1e3, 1) + " ms"; }

// A tensor name as the summary shows it, quoted: whole up to 80 bytes, else its first 64 and
// its length (a generated name can be megabytes, and the summary is a few lines for people).
std::string quoted_name(const std::string& name) {
  constexpr size_t kWhole = 80;
  constexpr size_t kShown = 64;
  if (name.size() <= kWhole) return "'" + name + "'";
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return "'" + name.substr(0, cut) + "...' (" + std::to_string(name.size()) + " bytes)";
}

// The rank that arrived last in most attributed steps (nullptr without any).
const RankTelemetry* most_often_last(const JobTelemetry& job) {
  if (job.attributed_steps == 0 || job.ranks.size() < 2) return nullptr;
  const auto it = std::max_element(
      job.ranks.begin(), job.ranks.end(),
      [](const RankTelemetry& a, const RankTelemetry& b) { return a.last_steps < b.last_steps; });
  return it->last_steps > 0 ? &*it : nullptr;
}

struct RankTotals {
  uint64_t operations = 0;
  uint64_t bytes = 0;
  double collective_seconds = 0;
};

RankTotals totals(const RankTelemetry& r) {
  RankTotals t;
  for (const CollectiveTotals& c : r.collectives) {
    t.operations += c.responses;
    t.bytes += c.bytes;
    t.collective_seconds += c.collective_seconds;
  }
  return t;
}

}  // namespace

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fixed(bytes, 0) + " B" : fixed(bytes, bytes < 10 ? 2 : 1) + " " + kUnits[unit];
}

bool has_telemetry(const JobTelemetry& job) {
  return std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankTelemetry& r) {
    return !r.collectives.empty() || r.tensors_negotiated > 0;
  });
}

std::optional<SlowestRank> find_slowest_rank(const JobTelemetry& job) {
  if (job.ranks.size() < 2) return std::nullopt;
  auto most_stalls = std::max_element(
      job.ranks.begin(), job.ranks.end(),
      [](const RankTelemetry& a, const RankTelemetry& b) { return a.stalls < b.stalls; });
  if (most_stalls->stalls > 0) {
    return SlowestRank{
        most_stalls->rank,
        "named missing in " + std::to_string(most_stalls->stalls) + " stall warning(s)"};
  }
  const bool rates_known = std::all_of(job.ranks.begin(), job.ranks.end(),
                                       [](const RankTelemetry& r) { return r.step_rate > 0; });
  auto [slowest, fastest] = std::minmax_element(
      job.ranks.begin(), job.ranks.end(),
      [](const RankTelemetry& a, const RankTelemetry& b) { return a.step_rate < b.step_rate; });
  // Synchronous data-parallel ranks step at the same rate; only a clear difference (a rank
  // stepping on its own between collectives) says more than who the others waited for.
  if (rates_known && slowest->step_rate < 0.95 * fastest->step_rate) {
    return SlowestRank{slowest->rank, "least steps per second: " + fixed(slowest->step_rate, 2) +
                                          ", the fastest rank " + fixed(fastest->step_rate, 2)};
  }
  // Step by step, from the ranks' own timings: right with the fast path too, where the
  // coordinator sees no requests in the steady state.
  if (const RankTelemetry* last = most_often_last(job)) {
    return SlowestRank{last->rank, "arrived last in " + std::to_string(last->last_steps) + " of " +
                                       std::to_string(job.attributed_steps) + " steps, " +
                                       ms_text(last->last_lateness_median_seconds) +
                                       " late at the median"};
  }
  // The rank everyone waits for is the one that waits least itself: it arrives last.
  auto least_wait = std::min_element(job.ranks.begin(), job.ranks.end(),
                                     [](const RankTelemetry& a, const RankTelemetry& b) {
                                       return a.wait_seconds < b.wait_seconds;
                                     });
  double others = 0;
  for (const RankTelemetry& r : job.ranks)
    if (r.rank != least_wait->rank) others += r.wait_seconds;
  others /= static_cast<double>(job.ranks.size() - 1);
  return SlowestRank{least_wait->rank, "the others waited " + seconds_text(others) +
                                           " each for their peers, it waited " +
                                           seconds_text(least_wait->wait_seconds)};
}

std::string describe_straggler(const JobTelemetry& job) {
  const RankTelemetry* last = most_often_last(job);
  if (last == nullptr) return "";
  const double share =
      100.0 * static_cast<double>(last->last_steps) / static_cast<double>(job.attributed_steps);
  std::string text = "rank " + std::to_string(last->rank) +
                     (last->host.empty() ? "" : " on " + last->host) + " was last in " +
                     fixed(share, 0) + "% of " + std::to_string(job.attributed_steps) + " steps, " +
                     ms_text(last->last_lateness_median_seconds) + " late at the median";
  if (!last->phase_growth.empty() && last->phase_growth.front().growth() > 0) {
    const auto& grew = last->phase_growth.front();
    text += "; its phase \"" + grew.phase + "\" grew most: " + ms_text(grew.seconds) +
            " against " + ms_text(grew.others_seconds) + " on the other ranks";
  }
  return text;
}

std::string format_telemetry_summary(const JobTelemetry& job) {
  if (!has_telemetry(job)) return "";
  std::ostringstream out;
  out << "hvrun: telemetry: job " << job.job_id << ", " << job.world_size << " rank"
      << (job.world_size == 1 ? "" : "s");
  if (job.restarts > 0) out << ", last of " << job.restarts + 1 << " attempts";
  if (job.steps > 0) out << ", " << job.steps << " steps";
  if (job.step_rate > 0) out << " (" << fixed(job.step_rate, 2) << "/s)";
  out << "\n";
  out << "hvrun: " << std::left << std::setw(6) << "rank" << std::setw(14) << "host" << std::right
      << std::setw(11) << "collectives" << std::setw(13) << "time in coll" << std::setw(12)
      << "bytes" << std::setw(14) << "bandwidth" << std::setw(13) << "negotiation" << std::setw(11)
      << "waiting"
      << "\n";
  for (const RankTelemetry& r : job.ranks) {
    const RankTotals t = totals(r);
    const std::string bandwidth =
        t.collective_seconds > 0
            ? format_bytes(static_cast<double>(t.bytes) / t.collective_seconds) + "/s"
            : "-";
    std::string host = r.host.size() > 13 ? r.host.substr(0, 12) + "~" : r.host;
    out << "hvrun: " << std::left << std::setw(6) << r.rank << std::setw(14) << host << std::right
        << std::setw(11) << t.operations << std::setw(13) << seconds_text(t.collective_seconds)
        << std::setw(12) << format_bytes(static_cast<double>(t.bytes)) << std::setw(14) << bandwidth
        << std::setw(13) << seconds_text(r.negotiation_seconds) << std::setw(11)
        << seconds_text(r.wait_seconds) << "\n";
  }
  // Collectives that ran without the coordinator (the fast path and the cached rounds, counted
  // under "<cpu backend>-fast": worker_lib/agreement/fast_path.h): a user tuning latency wants to
  // see whether the steady state took them.
  std::string fast;
  for (const RankTelemetry& r : job.ranks) {
    uint64_t n = 0;
    for (const auto& c : r.collectives)
      if (c.backend.ends_with("-fast")) n += c.responses;
    if (n > 0) fast += (fast.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r.rank) +
                       " " + std::to_string(n) + " of " + std::to_string(totals(r).operations);
  }
  if (!fast.empty())
    out << "hvrun: fast path (no coordinator): " << fast << " collectives\n";
  if (auto slowest = find_slowest_rank(job)) {
    for (const RankTelemetry& r : job.ranks) {
      if (r.rank == slowest->rank)
        out << "hvrun: slowest rank: " << r.rank << " on " << r.host << " (" << slowest->reason
            << ")\n";
    }
  }
  if (const std::string straggler = describe_straggler(job); !straggler.empty())
    out << "hvrun: straggler: " << straggler << "\n";
  auto longest = std::max_element(job.ranks.begin(), job.ranks.end(),
                                  [](const RankTelemetry& a, const RankTelemetry& b) {
                                    return a.longest_wait_seconds < b.longest_wait_seconds;
                                  });
  if (longest != job.ranks.end() && !longest->longest_wait_tensor.empty() &&
      longest->longest_wait_seconds > 0) {
    out << "hvrun: longest wait: tensor " << quoted_name(longest->longest_wait_tensor) << ", rank "
        << longest->rank << " waited " << seconds_text(longest->longest_wait_seconds)
        << " for the other ranks\n";
  }
  return out.str();
}

}  // namespace hvrun::launcher

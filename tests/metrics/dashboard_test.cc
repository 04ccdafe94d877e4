// scripts/grafana-dashboard.json: valid JSON (parsed by Python's json module), a Grafana
// dashboard over a Prometheus datasource variable, and every PromQL query in it names only
// series that /metrics exports — the list comes from the exporter's own table
// (coordinator/metrics/job_metrics.cc exported_families()), not from a copy.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "coordinator/metrics/job_metrics.h"
#include "tests/metrics/dashboard_queries.h"

namespace hvrun::coordinator::metrics {
namespace {

// Every hvrun_* identifier in a PromQL expression (metric names; hvrun uses no hvrun_ labels).
std::set<std::string> hvrun_names(const std::string& expr) {
  std::set<std::string> names;
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  };
  for (size_t at = expr.find("hvrun_"); at != std::string::npos; at = expr.find("hvrun_", at + 1)) {
    if (at > 0 && word_char(expr[at - 1])) continue;
    size_t end = at;
    while (end < expr.size() && word_char(expr[end])) ++end;
    names.insert(expr.substr(at, end - at));
  }
  return names;
}

TEST(Dashboard, NamesExtractedFromPromQl) {
  EXPECT_EQ(hvrun_names("sum by (rank) (rate(hvrun_a_total{job=~\"$job\"}[1m])) / hvrun_b"),
            (std::set<std::string>{"hvrun_a_total", "hvrun_b"}));
  EXPECT_TRUE(hvrun_names("rate(x_hvrun_y[1m])").empty());
}

TEST(Dashboard, ValidAndEveryQueryNamesExportedSeries) {
  const test::DashboardQueries d = test::read_dashboard(test::dashboard_path());
  ASSERT_TRUE(d.parsed) << "the dashboard is not valid JSON, or python3 is missing:\n" << d.error;
  for (const std::string& problem : d.problems) ADD_FAILURE() << "dashboard: " << problem;
  std::set<std::string> exported;
  for (const MetricFamily& f : exported_families()) exported.insert(std::string(f.name));

  const size_t panels = d.panels.size(), exprs = d.exprs.size();
  std::set<std::string> used;
  const std::set<std::string> titles(d.panels.begin(), d.panels.end());
  for (const std::string& expr : d.exprs) {
    const std::set<std::string> names = hvrun_names(expr);
    EXPECT_FALSE(names.empty()) << "a query names no hvrun series: " << expr;
    for (const std::string& name : names) {
      EXPECT_TRUE(exported.count(name)) << "'" << name << "' is not exported by /metrics: " << expr;
      used.insert(name);
    }
  }
  EXPECT_GE(panels, 10u);
  EXPECT_GE(exprs, panels);
  // The panels an operator looks at first: GPUs, bandwidth, negotiation, stalls, step rate, ranks.
  for (const char* title :
       {"GPU utilization", "GPU memory used", "Bandwidth per rank (bytes / time in collectives)",
        "Negotiation latency per tensor", "Stalls", "Step rate per rank", "Ranks alive"})
    EXPECT_TRUE(titles.count(title)) << "no panel '" << title << "'";
  for (const char* series : {"hvrun_gpu_utilization_percent", "hvrun_gpu_memory_used_bytes",
                             "hvrun_collective_bytes_total", "hvrun_collective_seconds_total",
                             "hvrun_negotiation_seconds_total", "hvrun_tensors_negotiated_total",
                             "hvrun_stalls_total", "hvrun_ranks_alive"})
    EXPECT_TRUE(used.count(series)) << series << " is on no panel";
}

}  // namespace
}  // namespace hvrun::coordinator::metrics

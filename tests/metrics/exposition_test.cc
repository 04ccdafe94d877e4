// The Prometheus text format (0.0.4) as hvrun writes it, and the /metrics page rendered from
// hand-filled JobTelemetry snapshots.
#include "coordinator/metrics/exposition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "coordinator/metrics/job_metrics.h"
#include "tests/metrics/sample_telemetry.h"
#include "tests/support/subprocess.h"

namespace hvrun::coordinator::metrics {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines_of(text))
    if (l == line) return true;
  return false;
}

TEST(Exposition, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b"), "a\\\"b");
  EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(escape_label_value("a\nb"), "a\\nb");
  EXPECT_EQ(escape_help("x \\ y\nz \"q\""), "x \\\\ y\\nz \"q\"");  // quotes stay in HELP
}

TEST(Exposition, FormatsValuesAsPrometheusReadsThem) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(1099511627776.0), "1099511627776");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(-2.5), "-2.5");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(std::stod(format_value(1.0 / 3.0)), 1.0 / 3.0);  // round trip
}

TEST(Exposition, ValidatesNames) {
  EXPECT_TRUE(valid_metric_name("hvrun_bytes_total"));
  EXPECT_TRUE(valid_metric_name("a:b_c"));
  EXPECT_FALSE(valid_metric_name("9lives"));
  EXPECT_FALSE(valid_metric_name("has-dash"));
  EXPECT_FALSE(valid_metric_name(""));
  EXPECT_TRUE(valid_label_name("local_rank"));
  EXPECT_FALSE(valid_label_name("a:b"));
}

TEST(Exposition, WritesHelpTypeAndSamples) {
  ExpositionWriter w;
  static constexpr MetricFamily kFamily{"test_things_total", MetricType::kCounter, "Things.\nMore"};
  w.begin(kFamily);
  w.sample({{"rank", "0"}, {"host", "a\"b"}}, 3);
  w.sample({}, 0.5);
  EXPECT_EQ(w.text(),
            "# HELP test_things_total Things.\\nMore\n"
            "# TYPE test_things_total counter\n"
            "test_things_total{rank=\"0\",host=\"a\\\"b\"} 3\n"
            "test_things_total 0.5\n");
}

TEST(JobMetrics, ExportedFamiliesAreWellNamedAndUnique) {
  std::set<std::string_view> names;
  for (const MetricFamily& f : exported_families()) {
    EXPECT_TRUE(valid_metric_name(f.name)) << f.name;
    EXPECT_TRUE(f.name.starts_with("hvrun_")) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << "twice: " << f.name;
    EXPECT_EQ(f.type == MetricType::kCounter, f.name.ends_with("_total")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
}

TEST(JobMetrics, RendersEveryExportedFamilyOnceInOrder) {
  const std::string page = render_metrics(test::full_sample_telemetry());
  std::vector<std::string> typed;
  for (const std::string& line : lines_of(page)) {
    if (line.rfind("# TYPE ", 0) == 0) typed.push_back(line.substr(7, line.find(' ', 7) - 7));
  }
  ASSERT_EQ(typed.size(), exported_families().size());
  for (size_t i = 0; i < typed.size(); ++i) EXPECT_EQ(typed[i], exported_families()[i].name);
  // Every family has samples in a full snapshot (else the dashboard test proves little).
  for (const MetricFamily& f : exported_families()) {
    bool sampled = false;
    for (const std::string& line : lines_of(page))
      if (line.rfind(std::string(f.name) + "{", 0) == 0 ||
          line.rfind(std::string(f.name) + " ", 0) == 0)
        sampled = true;
    EXPECT_TRUE(sampled) << "no sample of " << f.name << "\n" << page;
  }
}

TEST(JobMetrics, PerRankSeriesCarryRankLabelsAndBaseUnits) {
  const std::string page = render_metrics(test::full_sample_telemetry());
  EXPECT_TRUE(has_line(page,
                       "hvrun_collective_bytes_total{rank=\"0\",host=\"node-a\",local_rank=\"0\","
                       "op=\"allreduce\",backend=\"shm\"} 104857600"))
      << page;
  // The escaped host name of rank 1.
  EXPECT_TRUE(has_line(page,
                       "hvrun_collective_seconds_total{rank=\"1\",host=\"node "
                       "\\\"b\\\"\\\\x\\n\",local_rank=\"1\",op=\"allreduce\",backend=\"shm\"} 1"))
      << page;
  EXPECT_TRUE(has_line(page,
                       "hvrun_collective_operations_total{rank=\"0\",host=\"node-a\",local_rank="
                       "\"0\",op=\"broadcast\",backend=\"gloo\"} 20"));
  EXPECT_TRUE(
      has_line(page, "hvrun_wait_seconds_total{rank=\"0\",host=\"node-a\",local_rank=\"0\"} 1.25"));
  EXPECT_TRUE(
      has_line(page, "hvrun_cache_hits_total{rank=\"0\",host=\"node-a\",local_rank=\"0\"} 90"));
  EXPECT_TRUE(has_line(page, "hvrun_steps_total{rank=\"0\",host=\"node-a\",local_rank=\"0\"} 40"));
  EXPECT_TRUE(has_line(page, "hvrun_rank_joined{rank=\"0\",host=\"node-a\",local_rank=\"0\"} 0"));
}

TEST(JobMetrics, JobSeries) {
  const std::string page = render_metrics(test::full_sample_telemetry());
  EXPECT_TRUE(has_line(page, "hvrun_job_info{job_id=\"hvrun-1234abcd\"} 1"));
  EXPECT_TRUE(has_line(page, "hvrun_ranks_alive 2"));
  EXPECT_TRUE(has_line(page, "hvrun_ranks_joined 1"));
  EXPECT_TRUE(has_line(page, "hvrun_restarts_total 1"));
  EXPECT_TRUE(has_line(page, "hvrun_step_rate 2.5"));
  EXPECT_TRUE(has_line(page, "hvrun_fusion_fill_ratio 0.5"));  // 64 MiB / (4 x 32 MiB)
  EXPECT_TRUE(has_line(page, "hvrun_fusion_threshold_bytes 33554432"));
  EXPECT_TRUE(has_line(page, "hvrun_timeline_recording 1"));
}

TEST(JobMetrics, GpuSeriesLeaveOutUnreadableValues) {
  const std::string page = render_metrics(test::full_sample_telemetry());
  EXPECT_TRUE(has_line(page,
                       "hvrun_gpu_power_watts{rank=\"0\",host=\"node-a\",gpu=\"0\",name=\"NVIDIA "
                       "H200\",pci_bus_id=\"00000000:18:00.0\"} 450.5"))
      << page;
  EXPECT_EQ(page.find("hvrun_gpu_power_watts{rank=\"1\""), std::string::npos) << page;
  EXPECT_NE(page.find("hvrun_gpu_utilization_percent{rank=\"1\""), std::string::npos) << page;
  EXPECT_TRUE(has_line(page,
                       "hvrun_gpu_memory_total_bytes{rank=\"0\",host=\"node-a\",gpu=\"0\",name="
                       "\"NVIDIA H200\",pci_bus_id=\"00000000:18:00.0\"} 151397597184"));
  EXPECT_EQ(page.find(" -1\n"), std::string::npos) << page;
}

TEST(JobMetrics, EmptySnapshotHasTypesAndNoRatioWithoutData) {
  const std::string page = render_metrics({});
  EXPECT_NE(page.find("# TYPE hvrun_collective_bytes_total counter\n"), std::string::npos);
  EXPECT_EQ(page.find("hvrun_collective_bytes_total{"), std::string::npos);
  EXPECT_FALSE(has_line(page, "hvrun_fusion_fill_ratio 0"));
  EXPECT_EQ(page.find("\nhvrun_fusion_fill_ratio "), std::string::npos);
  EXPECT_EQ(page.find("\nhvrun_step_rate "), std::string::npos);
  EXPECT_EQ(page.find("NaN"), std::string::npos);
  EXPECT_TRUE(has_line(page, "hvrun_ranks_alive 0"));
}

// Prometheus' own linter (Debian package `prometheus`): the page parses, and names, types and
// units follow its conventions (counters _total, base units, HELP present).
TEST(JobMetrics, PromtoolAcceptsThePage) {
  const std::string promtool = "/usr/bin/promtool";
  if (::access(promtool.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no promtool (Debian package `prometheus`, in scripts/install-deps)";
  for (const telemetry::JobTelemetry& job :
       {test::full_sample_telemetry(), telemetry::JobTelemetry{}}) {
    test::RunOptions options;
    options.stdin_text = render_metrics(job);
    test::RunResult r = test::run_process({promtool, "check", "metrics"}, options);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << options.stdin_text;
    EXPECT_EQ(r.out + r.err, "") << "promtool's lint findings:\n" << r.out << r.err;
  }
}

}  // namespace
}  // namespace hvrun::coordinator::metrics

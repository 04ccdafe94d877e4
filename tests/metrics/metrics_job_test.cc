// End to end: a real 2-rank hvrun job with --metrics-port 0 serves per-rank series on /metrics,
// prints the end-of-job summary, and Debian's real Prometheus server scrapes it (its HTTP API
// then holds hvrun series with the right rank labels). Every process is killed by pid on every
// path; every wait is bounded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tests/metrics/dashboard_queries.h"
#include "tests/metrics/http_get.h"
#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A 2-rank job with /metrics on a free port, running until the test creates its stop file.
struct RunningJob {
  explicit RunningJob(std::vector<std::string> extra_args = {},
                      std::vector<std::string> worker_args = {},
                      std::map<std::string, std::string> env = {})
      : hvrun(args(extra_args, worker_args), env) {}
  std::vector<std::string> args(const std::vector<std::string>& extra,
                                const std::vector<std::string>& worker_args) const {
    std::vector<std::string> a{"--metrics-port", "0", "--device", "cpu", "-np", "2"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {bin_path("metrics_test_worker"), stop_file, "25"});
    a.insert(a.end(), worker_args.begin(), worker_args.end());
    return a;
  }
  TempDir dir{"metrics-job"};
  std::string stop_file = dir.file("stop");
  HvrunProcess hvrun;
  int port = 0;

  // The port hvrun printed ("hvrun: metrics at http://127.0.0.1:PORT/metrics").
  bool wait_for_port() {
    const std::regex printed(R"(hvrun: metrics at http://127\.0\.0\.1:([0-9]+)/metrics\n)");
    std::smatch m;
    hvrun.read_until([&](const std::string&) { return std::regex_search(hvrun.err(), m, printed); },
                     15s);
    if (!std::regex_search(hvrun.err(), m, printed)) return false;
    port = std::stoi(m[1]);
    return true;
  }
  // Scrapes until `done(page)` holds (bounded); the last page.
  std::string scrape_until(const std::function<bool(const std::string&)>& done,
                           std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::string page;
    while (Clock::now() < deadline) {
      if (auto reply = http_get(port, "/metrics", 2s); reply && reply->status == 200) {
        page = reply->body;
        if (done(page)) break;
      }
      hvrun.read_until([](const std::string&) { return false; }, 100ms);  // keeps its pipes drained
    }
    return page;
  }
  std::optional<int> finish() {
    std::ofstream(stop_file) << "stop\n";
    return hvrun.wait_exit(30s);
  }
};

bool has_rank_series(const std::string& page, const std::string& family, int rank) {
  const std::regex series(family + R"(\{rank=")" + std::to_string(rank) +
                          R"(",[^}]*\} ([0-9.e+]+)\n)");
  std::smatch m;
  return std::regex_search(page, m, series) && std::stod(m[1]) > 0;
}

TEST(MetricsJob, ServesPerRankSeriesWhileTheJobRunsAndPrintsASummary) {
  RunningJob job;
  ASSERT_TRUE(job.wait_for_port()) << job.hvrun.err();
  const std::string page = job.scrape_until(
      [](const std::string& p) {
        return has_rank_series(p, "hvrun_collective_bytes_total", 0) &&
               has_rank_series(p, "hvrun_collective_bytes_total", 1) &&
               has_rank_series(p, "hvrun_steps_total", 1);
      },
      20s);
  EXPECT_TRUE(has_rank_series(page, "hvrun_collective_bytes_total", 0)) << page;
  EXPECT_TRUE(has_rank_series(page, "hvrun_collective_bytes_total", 1)) << page;
  EXPECT_TRUE(has_rank_series(page, "hvrun_collective_seconds_total", 1)) << page;
  EXPECT_TRUE(has_rank_series(page, "hvrun_steps_total", 1)) << page;
  EXPECT_NE(page.find("\nhvrun_world_size 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\nhvrun_ranks_alive 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\nhvrun_restarts_total 0\n"), std::string::npos) << page;

  auto code = job.finish();
  ASSERT_TRUE(code) << "hvrun did not finish\n" << job.hvrun.err();
  EXPECT_EQ(*code, 0) << job.hvrun.err();
  // The end-of-job summary: a title, one row per rank, the slowest rank.
  const std::string& err = job.hvrun.err();
  EXPECT_NE(err.find("hvrun: telemetry: job hvrun-"), std::string::npos) << err;
  EXPECT_NE(err.find("\nhvrun: 0     "), std::string::npos) << err;
  EXPECT_NE(err.find("\nhvrun: 1     "), std::string::npos) << err;
  EXPECT_NE(err.find("hvrun: slowest rank: "), std::string::npos) << err;
  // hvrun closed the port when it exited.
  EXPECT_FALSE(http_get(job.port, "/metrics", 1s));
}

TEST(MetricsJob, OneEndpointAcrossRestartAttemptsCountsRestarts) {
  RunningJob job({"--max-restarts", "1"}, {"fail-first-attempt"});
  ASSERT_TRUE(job.wait_for_port()) << job.hvrun.err();
  // The second attempt (a new coordinator and job id) behind the same port.
  const std::string page = job.scrape_until(
      [](const std::string& p) {
        return p.find("\nhvrun_restarts_total 1\n") != std::string::npos &&
               has_rank_series(p, "hvrun_collective_bytes_total", 1);
      },
      25s);
  EXPECT_NE(page.find("\nhvrun_restarts_total 1\n"), std::string::npos) << page << job.hvrun.err();
  EXPECT_TRUE(has_rank_series(page, "hvrun_collective_bytes_total", 1)) << page;
  auto code = job.finish();
  ASSERT_TRUE(code) << job.hvrun.err();
  EXPECT_EQ(*code, 0) << job.hvrun.err();
  EXPECT_NE(job.hvrun.err().find("last of 2 attempts"), std::string::npos) << job.hvrun.err();
}

TEST(MetricsJob, CoordinatorDaemonServesMetrics) {
  ChildProcess daemon({bin_path("hvrun-coordinator"), "--world-size", "1", "--listen",
                       "127.0.0.1:0", "--metrics-port", "0"},
                      {.env = {{"HVRUN_SECRET", "metrics-test-secret"}}, .stdin_text = ""});
  ASSERT_TRUE(daemon.started());
  const std::regex printed(
      R"(hvrun-coordinator: metrics at http://127\.0\.0\.1:([0-9]+)/metrics\n)");
  std::smatch m;
  daemon.read_until([&](const std::string&) { return std::regex_search(daemon.err(), m, printed); },
                    15s);
  ASSERT_TRUE(std::regex_search(daemon.err(), m, printed)) << daemon.out() << daemon.err();
  auto reply = http_get(std::stoi(m[1]), "/metrics");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_NE(reply->body.find("\nhvrun_world_size 1\n"), std::string::npos) << reply->body;
  EXPECT_NE(reply->body.find("\nhvrun_ranks_alive 0\n"), std::string::npos) << reply->body;
  daemon.stop(5s);
  EXPECT_FALSE(daemon.running());
}

// The GPU series' whole path — the workers' sampler (worker_lib/telemetry/gpu_sampler), their
// reports, the coordinator, /metrics — with a STAND-IN libnvidia-ml.so.1 (tests/metrics/fake_nvml:
// three scripted GPUs, GPU 1 without utilization, GPU 2 without power), found by the workers
// through LD_LIBRARY_PATH. Real GPUs: scripts/gpu-check's "metrics" step.
TEST(MetricsJob, GpuSeriesFromTheWorkersSamplesThroughAStandInNvml) {
  RunningJob job(
      {}, {},
      {{"LD_LIBRARY_PATH", std::filesystem::path(bin_path("metrics_fake_nvml/libnvidia-ml.so.1"))
                               .parent_path()
                               .string()}});
  ASSERT_TRUE(job.wait_for_port()) << job.hvrun.err();
  const std::string rank1_gpu2 =
      "hvrun_gpu_memory_used_bytes{rank=\"1\",host=\"localhost\",gpu=\"2\",name=\"Fake GPU "
      "C\",pci_bus_id=\"00000000:3B:00.0\"} 32212254720\n";
  const std::string page = job.scrape_until(
      [&](const std::string& p) {
        return p.find(rank1_gpu2) != std::string::npos &&
               p.find("hvrun_gpu_power_watts{rank=\"0\"") != std::string::npos;
      },
      20s);
  EXPECT_NE(page.find(rank1_gpu2), std::string::npos) << page;
  EXPECT_NE(page.find("hvrun_gpu_power_watts{rank=\"0\",host=\"localhost\",gpu=\"0\",name=\"Fake "
                      "GPU A\",pci_bus_id=\"00000000:18:00.0\"} 300.5\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("hvrun_gpu_temperature_celsius{rank=\"0\",host=\"localhost\",gpu=\"2\",name="
                      "\"Fake GPU C\",pci_bus_id=\"00000000:3B:00.0\"} 70\n"),
            std::string::npos)
      << page;
  // Unreadable values (NVML errors) are left out, never written as -1.
  EXPECT_EQ(page.find("hvrun_gpu_utilization_percent{rank=\"0\",host=\"localhost\",gpu=\"1\""),
            std::string::npos)
      << page;
  EXPECT_EQ(page.find("hvrun_gpu_power_watts{rank=\"1\",host=\"localhost\",gpu=\"2\""),
            std::string::npos)
      << page;
  EXPECT_EQ(page.find("} -1\n"), std::string::npos) << page;
  auto code = job.finish();
  ASSERT_TRUE(code) << job.hvrun.err();
  EXPECT_EQ(*code, 0) << job.hvrun.err();
}

TEST(MetricsJob, AFailedJobStillPrintsTheSummaryAfterTheFailure) {
  const TempDir temp("metrics-failed");
  const std::string& dir = temp.path();
  RunOptions options;
  options.env["HVRUN_DEVICE"] = "cpu";
  options.env["HVRUN_GRACE_PERIOD"] = "2";
  // Rank 1 exits with code 3 after its first step; rank 0 is stopped by hvrun.
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", bin_path("metrics_test_worker"),
                             dir + "/stop", "25", "fail-first-attempt"},
                            options);
  EXPECT_NE(r.exit_code, 0) << r.err;
  const size_t failure = r.err.find("hvrun: job failed: ");
  const size_t summary = r.err.find("hvrun: telemetry: job hvrun-");
  ASSERT_NE(failure, std::string::npos) << r.err;
  ASSERT_NE(summary, std::string::npos) << r.err;
  EXPECT_LT(failure, summary) << r.err;
  EXPECT_NE(r.err.find("\nhvrun: 1     "), std::string::npos) << r.err;
}

TEST(MetricsJob, SummaryOffWithTheSetting) {
  const TempDir temp("metrics-nosummary");
  const std::string& dir = temp.path();
  std::ofstream(dir + "/stop") << "stop\n";  // one step, then every rank stops
  RunOptions options;
  options.env["HVRUN_SUMMARY"] = "false";
  options.env["HVRUN_DEVICE"] = "cpu";
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "2", bin_path("metrics_test_worker"), dir + "/stop"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("hvrun: telemetry:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("metrics at"), std::string::npos)
      << r.err;  // --metrics-port is off by default
}

std::string find_prometheus() {
  for (const char* candidate : {"/usr/bin/prometheus", "/usr/local/bin/prometheus"})
    if (::access(candidate, X_OK) == 0) return candidate;
  return "";
}

TEST(MetricsJob, RealPrometheusScrapesTheJobWithRankLabels) {
  const std::string prometheus = find_prometheus();
  if (prometheus.empty())
    GTEST_SKIP() << "no prometheus binary (Debian package `prometheus`, in scripts/install-deps)";
  RunningJob job;
  ASSERT_TRUE(job.wait_for_port()) << job.hvrun.err();

  const TempDir temp("metrics-prometheus");
  const std::string& dir = temp.path();
  const int prometheus_port = free_loopback_port();
  ASSERT_GT(prometheus_port, 0);
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: hvrun\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
      << "    static_configs:\n      - targets: ['127.0.0.1:" << job.port << "']\n";
  ChildProcess server({prometheus, "--config.file=" + dir + "/prometheus.yml",
                       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port),
                       "--storage.tsdb.path=" + dir + "/data", "--log.level=warn"},
                      {.log_file = dir + "/prometheus.log"});
  ASSERT_TRUE(server.started());

  // Prometheus' own API: an instant query for a hvrun series, until both ranks are in it.
  const std::string query =
      "/api/v1/query?query=" + url_encode("hvrun_collective_bytes_total{job=\"hvrun\"}");
  std::string answer;
  const auto deadline = Clock::now() + 25s;
  bool both = false;
  while (Clock::now() < deadline && server.running()) {
    if (auto reply = http_get(prometheus_port, query, 2s); reply && reply->status == 200) {
      answer = reply->body;
      both = answer.find("\"rank\":\"0\"") != std::string::npos &&
             answer.find("\"rank\":\"1\"") != std::string::npos;
      if (both) break;
    }
    job.hvrun.read_until([](const std::string&) { return false; }, 200ms);  // drains hvrun's pipes
  }
  EXPECT_TRUE(both) << "Prometheus' answer: " << answer << "\nits log:\n"
                    << read_file(dir + "/prometheus.log") << "\nhvrun:\n"
                    << job.hvrun.err();
  EXPECT_NE(answer.find("\"status\":\"success\""), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"__name__\":\"hvrun_collective_bytes_total\""), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("\"host\":\""), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"op\":\"allreduce\""), std::string::npos) << answer;
  // The target is up (its scrape parsed: a malformed page would make up 0).
  auto up = http_get(prometheus_port, "/api/v1/query?query=" + url_encode("up{job=\"hvrun\"}"), 2s);
  ASSERT_TRUE(up);
  EXPECT_NE(up->body.find("\"value\":["), std::string::npos) << up->body;
  EXPECT_NE(up->body.find(",\"1\"]"), std::string::npos) << up->body;

  // Every query of scripts/grafana-dashboard.json is PromQL this Prometheus accepts (with the
  // dashboard's variables filled in), and the bandwidth-per-rank panel has data for both ranks.
  const DashboardQueries dashboard = read_dashboard(dashboard_path());
  ASSERT_TRUE(dashboard.parsed) << dashboard.error;
  auto grafana_to_promql = [](std::string expr) {
    for (const auto& [var, value] :
         {std::pair<std::string, std::string>{"$__rate_interval", "5s"}, {"$job", "hvrun"}})
      for (size_t at; (at = expr.find(var)) != std::string::npos;)
        expr.replace(at, var.size(), value);
    return expr;
  };
  std::string bandwidth_query;
  for (const std::string& expr : dashboard.exprs) {
    if (expr.rfind("label_values(", 0) == 0) continue;  // a Grafana function, not PromQL
    if (expr.find("hvrun_collective_bytes_total") != std::string::npos &&
        expr.find("hvrun_collective_seconds_total") != std::string::npos)
      bandwidth_query = grafana_to_promql(expr);
    auto reply =
        http_get(prometheus_port, "/api/v1/query?query=" + url_encode(grafana_to_promql(expr)), 2s);
    ASSERT_TRUE(reply) << expr;
    EXPECT_NE(reply->body.find("\"status\":\"success\""), std::string::npos)
        << "Prometheus rejects the dashboard query " << grafana_to_promql(expr) << ":\n"
        << reply->body;
  }
  ASSERT_FALSE(bandwidth_query.empty());
  std::string bandwidth;
  for (const auto until = Clock::now() + 15s; Clock::now() < until && server.running();) {
    if (auto reply =
            http_get(prometheus_port, "/api/v1/query?query=" + url_encode(bandwidth_query), 2s)) {
      bandwidth = reply->body;
      if (bandwidth.find("\"rank\":\"0\"") != std::string::npos &&
          bandwidth.find("\"rank\":\"1\"") != std::string::npos)
        break;
    }
    job.hvrun.read_until([](const std::string&) { return false; }, 200ms);
  }
  EXPECT_NE(bandwidth.find("\"rank\":\"1\""), std::string::npos) << bandwidth_query << "\n"
                                                                 << bandwidth;

  server.stop(5s);
  EXPECT_FALSE(server.running());
  auto code = job.finish();
  ASSERT_TRUE(code) << job.hvrun.err();
  EXPECT_EQ(*code, 0) << job.hvrun.err();
}

}  // namespace
}  // namespace hvrun::test

#include "tests/support/worker_job.h"

#include <thread>

#include "coordinator/service/coordinator_server.h"

namespace hvrun::test {

bool JobResult::all_succeeded() const {
  if (!coordinator_started || ranks.empty()) return false;
  for (const auto& r : ranks)
    if (r.exit_code != 0 || r.timed_out) return false;
  return true;
}

bool JobResult::printed(const std::string& text) const {
  if (ranks.empty()) return false;
  for (const auto& r : ranks)
    if (r.out.find(text) == std::string::npos) return false;
  return true;
}

bool JobResult::printed(const std::string& text, std::initializer_list<int> which) const {
  for (int rank : which)
    if (rank < 0 || static_cast<size_t>(rank) >= ranks.size() ||
        ranks[static_cast<size_t>(rank)].out.find(text) == std::string::npos)
      return false;
  return which.size() > 0;
}

std::string JobResult::describe() const {
  std::string text;
  if (!coordinator_started) text += "coordinator failed to start: " + coordinator_error + "\n";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    text += "--- rank " + std::to_string(i) + ": exit " + std::to_string(r.exit_code) +
            (r.timed_out ? " (TIMED OUT, killed)" : "") + " after " +
            std::to_string(r.elapsed.count()) + " ms\nstdout:\n" + r.out + "stderr:\n" + r.err;
  }
  return text;
}

JobResult run_job(int np, const std::vector<std::string>& argv, const JobOptions& options) {
  JobResult result;
  coordinator::CoordinatorOptions copts;
  copts.listen_address = "127.0.0.1:0";
  copts.secret = "worker-test-secret";
  copts.world_size = np;
  copts.start_timeout = std::chrono::milliseconds(20000);
  copts.fusion_threshold_bytes = options.fusion_threshold_bytes;
  copts.join_average_all = options.join_average_all;
  copts.heartbeat_timeout = options.heartbeat_timeout;  // workers' heartbeat interval follows it
  copts.cycle_time = options.cycle_time;
  auto server = coordinator::CoordinatorServer::start(copts);
  if (!server.is_ok()) {
    result.coordinator_error = server.status().to_string();
    return result;
  }
  result.coordinator_started = true;
  result.ranks.resize(static_cast<size_t>(np));
  std::vector<std::thread> threads;
  for (int r = 0; r < np; ++r) {
    RunOptions run;
    run.timeout = options.timeout;
    std::string rank = std::to_string(r), size = std::to_string(np);
    run.env = {
        {"HVRUN_RANK", rank}, {"HVRUN_SIZE", size}, {"HVRUN_LOCAL_RANK", rank},
        {"HVRUN_LOCAL_SIZE", size}, {"HVRUN_CROSS_RANK", "0"}, {"HVRUN_CROSS_SIZE", "1"},
        {"HVRUN_HOST", "localhost"}, {"HVRUN_COORDINATOR_ADDR", (*server)->address()},
        {"HVRUN_SECRET", copts.secret}, {"HVRUN_JOB_ID", (*server)->job_id()},
        {"HVRUN_DATA_ADDR", "127.0.0.1"}, {"RANK", rank}, {"WORLD_SIZE", size},
        {"LOCAL_RANK", rank}, {"LOCAL_WORLD_SIZE", size}, {"HOROVOD_RANK", rank},
        {"HOROVOD_SIZE", size}, {"HOROVOD_LOCAL_RANK", rank}, {"HOROVOD_LOCAL_SIZE", size},
        {"HOROVOD_CROSS_RANK", "0"}, {"HOROVOD_CROSS_SIZE", "1"}};
    for (const auto& [k, v] : options.extra_env) run.env[k] = v;
    threads.emplace_back([&result, &argv, r, run] {
      result.ranks[static_cast<size_t>(r)] = run_process(argv, run);
    });
  }
  for (auto& t : threads) t.join();
  result.fast_path_collectives.assign(static_cast<size_t>(np), 0);
  result.fast_path_bytes.assign(static_cast<size_t>(np), 0);
  result.tensors_negotiated.assign(static_cast<size_t>(np), 0);
  const auto telemetry = (*server)->telemetry();
  result.plans = telemetry.plans;
  for (const auto& rank : telemetry.ranks)
    if (rank.rank >= 0 && rank.rank < np)
      result.tensors_negotiated[static_cast<size_t>(rank.rank)] = rank.tensors_negotiated;
  for (const auto& rank : telemetry.ranks)
    for (const auto& c : rank.collectives)
      if (c.backend.ends_with("-fast") && rank.rank >= 0 && rank.rank < np) {
        result.fast_path_collectives[static_cast<size_t>(rank.rank)] += c.responses;
        result.fast_path_bytes[static_cast<size_t>(rank.rank)] += c.bytes;
      }
  (*server)->shutdown();
  return result;
}

}  // namespace hvrun::test

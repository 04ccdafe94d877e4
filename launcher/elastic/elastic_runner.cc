#include "launcher/elastic/elastic_runner.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "launcher/elastic/host_discovery.h"
#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/local_workers.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

namespace {
// Records are never moved (pipes and streams point into them), so the job starts at most this
// many processes in all: every replacement and added slot takes a new one.
int record_capacity(const ElasticOptions& o) { return 4 * std::max(o.start_np, o.max_np) + 16; }

std::string seconds_text(std::chrono::milliseconds ms) {
  return std::to_string(static_cast<int>(ms.count() / 1000));
}
}  // namespace

// This host's workers, kept "running" while the job waits for hosts with none left: the
// supervisor's loop ends when no child runs.
class ElasticRunner::HeldChildren final : public Children {
 public:
  explicit HeldChildren(LocalWorkers& local) : local_(local) {}
  bool held = false;

  WorkerRecord* reap() override { return local_.reap(); }
  bool awaits_explanation(const JobEnd& end) const override { return local_.awaits_explanation(end); }
  void signal_all(int sig) override {
    held = false;
    local_.signal_all(sig);
  }
  void grace_over() override { local_.grace_over(); }
  void kill_now(int sig) override { local_.kill_now(sig); }
  bool running() const override { return held || local_.running(); }
  bool settle_leftovers(bool may_wait) override { return local_.settle_leftovers(may_wait); }
  bool output_open() const override { return local_.output_open(); }
  void close_output() override { local_.close_output(); }

 private:
  LocalWorkers& local_;
};

ElasticRunner::ElasticRunner(ElasticRunnerConfig config, OutputSink& out, OutputSink& err,
                             OrphanGuard* guard)
    : SupervisedJob(
          [&] {
            SupervisedJobConfig base = config;
            base.absorb_failure = [this](const JobEnd& failure) { return absorb(failure); };
            return base;
          }(),
          out, err),
      config_(std::move(config)),
      guard_(guard),
      membership_(config_.elastic) {}

ElasticRunner::~ElasticRunner() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (discovery_.joinable()) discovery_.join();
}

int ElasticRunner::run(const std::vector<ElasticSlot>& first) {
  if (!make_output_dir()) return 2;
  std::vector<WorkerRecord>& records = supervisor().workers();
  records.reserve(static_cast<size_t>(record_capacity(config_.elastic)));
  LocalWorkers local(supervisor().io(), records, streams(), supervisor(), guard_);
  HeldChildren children(local);
  local_ = &local;
  children_ = &children;
  hosts_timer_ = std::make_unique<boost::asio::steady_timer>(supervisor().io());
  const int code = supervisor().run(children, [&] {
    for (const ElasticSlot& slot : first)
      if (!start_member(slot)) return;
    supervisor().say("elastic job: " + std::to_string(first.size()) + " ranks (--min-np " +
                     std::to_string(config_.elastic.min_np) + ", --max-np " +
                     (config_.elastic.max_np > 0 ? std::to_string(config_.elastic.max_np)
                                                 : std::string("unlimited")) +
                     ")");
    if (!config_.elastic.discovery_script.empty())
      discovery_ = std::thread([this] { discover_until_stopped(); });
  });
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (discovery_.joinable()) discovery_.join();
  hosts_timer_.reset();
  local_ = nullptr;
  children_ = nullptr;
  if (code == 0 && membership_.resets() > 0)
    supervisor().say("elastic job finished after " + std::to_string(membership_.resets()) +
                     " reset(s), on " + std::to_string(membership_.size()) + " ranks at the end");
  return code;
}

bool ElasticRunner::start_member(const ElasticSlot& slot) {
  std::vector<WorkerRecord>& records = supervisor().workers();
  if (records.size() >= records.capacity()) {
    supervisor().say("elastic: this job has started " + std::to_string(records.size()) +
                     " processes, its most; no new rank on " + slot.host);
    return false;
  }
  const int id = static_cast<int>(records.size());
  WorkerRecord record;
  record.rank = id;
  record.host = slot.host;
  records.push_back(record);
  handled_.push_back(false);
  Status started = local_->start(static_cast<size_t>(id), config_.command_path, config_.argv,
                                 config_.environment(id, slot), {});
  if (!started.is_ok()) {
    handled_[static_cast<size_t>(id)] = true;
    supervisor().start_failed(JobEnd{JobEndKind::kStartFailed, id, 2, 0,
                                     "a worker on " + slot.host + " could not be started: " +
                                         started.message()});
    return false;
  }
  membership_.add({id, slot});
  return true;
}

std::string ElasticRunner::describe(const WorkerRecord& record) const {
  return "the worker started as rank " + std::to_string(record.rank) + " on host " + record.host +
         " (pid " + std::to_string(record.pid) + ") " + describe_wait_status(record.wait_status);
}

bool ElasticRunner::absorb(const JobEnd&) {
  if (supervisor().ending()) return false;
  std::vector<WorkerRecord>& records = supervisor().workers();
  const auto now = ElasticMembership::Clock::now();
  std::string lost;
  std::string lost_host;
  for (size_t i = 0; i < records.size(); ++i) {
    if (handled_[i] || !records[i].exited) continue;
    handled_[i] = true;
    if (!is_failure(records[i].wait_status)) {
      membership_.remove_finished(records[i].rank);
      continue;
    }
    if (!membership_.remove_failed(records[i].rank, now)) continue;
    if (!lost.empty()) lost += "; ";
    lost += describe(records[i]);
    lost_host = records[i].host;
  }
  if (lost.empty()) return true;
  if (!membership_.count_reset()) {
    supervisor().say("elastic: " + lost + "; --reset-limit " +
                     std::to_string(config_.elastic.reset_limit) + " reached");
    return false;
  }
  std::string blacklist;
  for (const std::string& host : membership_.failed_hosts(now)) blacklist += " " + host + ";";
  supervisor().say("elastic: " + lost + "; blacklisted:" + blacklist + " " +
                   std::to_string(membership_.size()) + " ranks left");
  if (membership_.short_of_min()) {
    wait_for_hosts(lost);
    return true;
  }
  config_.hooks.change_membership(membership_.plan(), lost, lost_host);
  return true;
}

void ElasticRunner::wait_for_hosts(const std::string& lost) {
  if (waiting_for_hosts_) return;
  waiting_for_hosts_ = true;
  children_->held = true;
  supervisor().say("elastic: " + std::to_string(membership_.size()) + " ranks, fewer than --min-np " +
                   std::to_string(config_.elastic.min_np) + "; waiting up to " +
                   seconds_text(config_.elastic.timeout) + " s (--elastic-timeout) for hosts");
  hosts_timer_->expires_after(config_.elastic.timeout);
  hosts_timer_->async_wait([this, lost](boost::system::error_code ec) {
    if (ec || !waiting_for_hosts_) return;
    waiting_for_hosts_ = false;
    std::string hosts;
    for (const std::string& host : membership_.failed_hosts(ElasticMembership::Clock::now()))
      hosts += (hosts.empty() ? "" : "; ") + host;
    supervisor().post_control_plane_failure(
        "elastic: " + std::to_string(membership_.size()) + " ranks, fewer than --min-np " +
            std::to_string(config_.elastic.min_np) + ", and no host came back within " +
            seconds_text(config_.elastic.timeout) + " s (--elastic-timeout); lost: " + lost +
            "; failed hosts: " + hosts,
        -1);
    children_->held = false;
  });
}

void ElasticRunner::stop_waiting() {
  waiting_for_hosts_ = false;
  children_->held = false;
  hosts_timer_->cancel();
}

void ElasticRunner::on_discovered(const Result<std::vector<HostSlots>>& hosts) {
  if (supervisor().ending() || local_ == nullptr) return;
  if (!hosts.is_ok()) {
    if (hosts.status().message() != discovery_error_) {
      discovery_error_ = hosts.status().message();
      supervisor().say("elastic: " + discovery_error_ + "; the hosts known stay");
    }
    return;
  }
  discovery_error_.clear();
  const std::vector<ElasticSlot> slots =
      membership_.free_slots(*hosts, ElasticMembership::Clock::now());
  if (slots.empty()) return;
  if (!membership_.count_reset()) {
    supervisor().post_control_plane_failure(
        "elastic: --reset-limit " + std::to_string(config_.elastic.reset_limit) +
            " reached (hosts were added)",
        -1);
    return;
  }
  int added = 0;
  std::string where;
  for (const ElasticSlot& slot : slots) {
    if (!start_member(slot)) break;
    ++added;
    where += (where.empty() ? "" : ", ") + slot.host + " slot " + std::to_string(slot.local_rank);
  }
  if (added == 0) return;
  supervisor().say("elastic: " + std::to_string(added) + " rank(s) added (" + where + "); " +
                   std::to_string(membership_.size()) + " ranks at the next reset");
  if (waiting_for_hosts_) {
    if (membership_.short_of_min()) return;
    stop_waiting();
    config_.hooks.change_membership(membership_.plan(), "slots were added", "");
    return;
  }
  config_.hooks.add_slots(membership_.plan(), added);
}

void ElasticRunner::discover_until_stopped() {
  for (;;) {
    auto found = run_discovery_script(config_.elastic.discovery_script, kDiscoveryDeadline);
    Result<std::vector<HostSlots>> hosts =
        found.is_ok() ? parse_discovered_hosts(*found, config_.elastic.slots_per_host)
                      : Result<std::vector<HostSlots>>(found.status());
    post_task([this, hosts = std::move(hosts)] { on_discovered(hosts); });
    std::unique_lock<std::mutex> lock(stop_mutex_);
    if (stop_cv_.wait_for(lock, kDiscoveryInterval, [&] { return stop_; })) return;
  }
}

}  // namespace hvrun::launcher

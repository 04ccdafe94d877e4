#include "launcher/elastic/elastic_runner.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <chrono>

#include "launcher/plan/cpu_binding.h"
#include "launcher/process/process_group.h"
#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/local_workers.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

namespace {
// Records are never moved (pipes and streams point into them), so the job starts at most this
// many processes in all: every replacement and added slot takes a new one.
int record_capacity(const ElasticOptions& o) {
  return 4 * (std::max(o.start_np, o.max_np) + o.spares) + 16;
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
            base.absorb_failure = [this](const JobEnd&) {
              return controller_ != nullptr && controller_->absorb();
            };
            // Ranks renumber at each reset: the coordinator is told nothing of a launch-time
            // rank's exit; the controller hears every one (a clean exit ends the training).
            base.coordinator.worker_exited = [this](int id, const std::string&) {
              post_task([this, id] {
                if (controller_) controller_->exited(id);
              });
            };
            return base;
          }(),
          out, err),
      config_(std::move(config)),
      guard_(guard) {}

ElasticRunner::~ElasticRunner() = default;

int ElasticRunner::run(const std::vector<ElasticSlot>& first) {
  if (!make_output_dir()) return 2;
  std::vector<WorkerRecord>& records = supervisor().workers();
  records.reserve(static_cast<size_t>(record_capacity(config_.elastic)));
  LocalWorkers local(supervisor().io(), records, streams(), supervisor(), guard_,
                     config_.grace_period);
  // A rank that dies is replaced as its death begins, not once the kernel has torn it down.
  local.watch_for_dying();
  HeldChildren children(local);
  local_ = &local;
  children_ = &children;
  ElasticRunnerSide side;
  side.records = [this]() -> std::vector<WorkerRecord>& { return supervisor().workers(); };
  side.ending = [this] { return supervisor().ending(); };
  side.say = [this](const std::string& text) { supervisor().say(text); };
  side.fail = [this](const std::string& text) { supervisor().post_control_plane_failure(text, -1); };
  side.hold = [this](bool held) { children_->held = held; };
  // Spares, and the slots a discovery script offers (growth, a lost rank's host back).
  side.start = [this](const ElasticSlot& slot, bool spare) { return start_member(slot, spare); };
  // Spares at the end of the training, and a straggler replaced by a spare.
  side.stop = [this](int id) {
    WorkerRecord& record = supervisor().workers()[static_cast<size_t>(id)];
    if (record.pid > 0 && !record.exited && signal_group(record.pid, SIGTERM))
      record.signalled_by_hvrun = true;
  };
  controller_ = std::make_unique<ElasticController>(config_.elastic, config_.hooks, std::move(side),
                                                    supervisor().io());
  const int code = supervisor().run(children, [&] {
    int local_ranks = 0;
    for (const ElasticSlot& slot : first) {
      const int id = start_member(slot, /*spare=*/false);
      if (id < 0) return;
      controller_->started(id, slot);
      if (slot.host == first.front().host) local_ranks = std::max(local_ranks, slot.local_rank + 1);
    }
    supervisor().say("elastic job: " + std::to_string(first.size()) + " ranks (--min-np " +
                     std::to_string(config_.elastic.min_np) + ", --max-np " +
                     (config_.elastic.max_np > 0 ? std::to_string(config_.elastic.max_np)
                                                 : std::string("unlimited")) +
                     ")");
    if (config_.elastic.spares > 0 && !first.empty())
      controller_->top_up_spares({{first.front().host, local_ranks + config_.elastic.spares}});
  });
  const int resets = controller_->membership().resets();
  const int size = controller_->membership().size();
  controller_.reset();
  local_ = nullptr;
  children_ = nullptr;
  if (code == 0 && resets > 0)
    supervisor().say("elastic job finished after " + std::to_string(resets) + " reset(s), on " +
                     std::to_string(size) + " ranks at the end");
  return code;
}

int ElasticRunner::start_member(const ElasticSlot& slot, bool spare) {
  std::vector<WorkerRecord>& records = supervisor().workers();
  if (records.size() >= records.capacity()) {
    supervisor().say("elastic: this job has started " + std::to_string(records.size()) +
                     " processes, its most; no new rank on " + slot.host);
    return -1;
  }
  const int id = static_cast<int>(records.size());
  WorkerRecord record;
  record.rank = id;
  record.host = slot.host;
  records.push_back(record);
  const std::vector<std::string> envp = config_.environment(id, slot, spare);
  Status started = local_->start(static_cast<size_t>(id), config_.command_path, config_.argv, envp,
                                 binding_for_worker(envp));
  if (!started.is_ok()) {
    supervisor().start_failed(JobEnd{JobEndKind::kStartFailed, id, 2, 0,
                                     "a worker on " + slot.host + " could not be started: " +
                                         started.message()});
    return -1;
  }
  return id;
}

}  // namespace hvrun::launcher

// What an elastic job's launcher decides when ranks are lost or slots appear, on the
// supervisor's loop, whatever runs the ranks (this host's workers: elastic_runner.h; other
// hosts' agents: remote/remote_agents.cc). It keeps the membership (membership.h), tells the
// coordinator the next one, waits for hosts when short of --min-np (up to --elastic-timeout,
// then fails naming what was lost) and starts workers on discovered slots where the runner can.
// With --spares it keeps hot spares outside the membership: a lost rank's place goes to one at
// the next membership, and a spare used is started again on a slot the runner offers.
//
// Threads: the supervisor's loop only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/status.h"
#include "coordinator/telemetry/job_telemetry.h"
#include "launcher/elastic/membership.h"
#include "launcher/options/options.h"
#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

// The coordinator's side of a membership change (CoordinatorServer::change_membership and
// add_slots), in slots.
struct ElasticHooks {
  std::function<void(const std::vector<ElasticSlot>& plan, const std::string& reason,
                     const std::string& host)>
      change_membership;
  std::function<void(const std::vector<ElasticSlot>& plan, int added)> add_slots;
  // The slots of the latest membership whose ranks all registered
  // (CoordinatorServer::formed_membership()).
  std::function<std::vector<ElasticSlot>()> formed;
  // --replace-stragglers: the rank the coordinator's straggler attribution names as
  // replaceable now, if any (JobTelemetry::replaceable_straggler). Empty: never replaced.
  std::function<std::optional<coordinator::telemetry::StragglerEvidence>()> straggler;
};

// What the controller needs of the runner.
struct ElasticRunnerSide {
  std::function<std::vector<WorkerRecord>&()> records;  // the ranks' records (id = index)
  std::function<bool()> ending;                         // the job is being torn down
  std::function<void(const std::string&)> say;          // "hvrun: " is added
  std::function<void(const std::string&)> fail;         // ends the job with this message
  // Keeps the job alive with no rank running (waiting for hosts); may be empty.
  std::function<void(bool)> hold;
  // Starts a new process in `slot` (`spare`: a hot spare, HVRUN_ELASTIC_SPARE=1), adds its
  // record; its id, or -1 (said why). Empty: this runner cannot add ranks or spares.
  std::function<int(const ElasticSlot&, bool spare)> start;
  // Stops process `id` (SIGTERM to its process group, wherever it runs); its exit is then
  // taken as a withdrawal (or, for a straggler, as a lost rank whose host did not fail).
  // Empty: this runner takes no slot away.
  std::function<void(int id)> stop;
  // Whether `host` may get `slots` new ranks now: its health check passed since it last got
  // ranks. When not, its check is under way and on_host_checked() follows. Empty: hosts are not
  // checked (no --health-check).
  std::function<bool(const std::string& host, int slots)> host_cleared;
};

class ElasticController {
 public:
  ElasticController(ElasticOptions options, ElasticHooks hooks, ElasticRunnerSide runner,
                    boost::asio::io_context& io);

  ElasticMembership& membership() { return membership_; }
  // A rank of the first membership started (ids in rank order).
  void started(int id, const ElasticSlot& slot) { membership_.add({id, slot}); }

  // The supervisor's FailureAbsorber: takes every exit and lost rank not yet seen into the
  // membership; true when the job goes on.
  bool absorb();
  // Process `id`'s exit was recorded (every exit, a clean one too: absorb() hears failures
  // only). A rank that exits 0 has finished its training.
  void exited(int id);
  // What the discovery script printed (or why it failed).
  void on_discovered(const Result<std::vector<HostSlots>>& hosts);
  // The health check of `host` (asked for through host_cleared) ended: a healthy host's slots
  // are offered again; an unhealthy one is blacklisted, named with `reason`.
  void on_host_checked(const std::string& host, bool healthy, const std::string& reason);
  // Starts spares on unheld slots of `hosts` until --spares are ready (at the start of a job
  // without a discovery script: this host's slots after the ranks').
  void top_up_spares(const std::vector<HostSlots>& hosts);
  // --replace-stragglers: asks the coordinator for a replaceable straggler and, with a spare
  // ready, stops it (its place goes to the spare in absorb()); with none, names it once per
  // membership and leaves it running. Runs every kStragglerPoll once started.
  void check_stragglers();
  static constexpr std::chrono::milliseconds kStragglerPoll{250};
  // "the worker started as rank 2 on host b (pid 7) was killed by SIGKILL".
  static std::string describe(const WorkerRecord& record);

 private:
  void wait_for_hosts(const std::string& lost);
  // Gives up to `count` lost ranks' places to spares, on other hosts than `lost_hosts` first;
  // "the worker started as rank 3 on host b, ..." for those that took one.
  std::string promote_spares(int count, const std::vector<std::string>& lost_hosts);
  // Stops the members whose slots `hosts` no longer lists (their exits are withdrawals).
  void withdraw_unlisted(const std::vector<HostSlots>& hosts);
  void stop_waiting();
  // The hosts of `slots` whose workers may start now: those a health check cleared (each host
  // asked once), every one without health checks.
  std::set<std::string> cleared_hosts(const std::vector<ElasticSlot>& slots);
  static std::vector<ElasticSlot> on_hosts(const std::set<std::string>& hosts,
                                           const std::vector<ElasticSlot>& slots);
  void start_spares(const std::vector<ElasticSlot>& slots);
  // A rank finished its training (exited 0): the job ends as its ranks do. Workers started
  // for added slots that no formed membership took in never trained: they are stopped.
  void end_training(const WorkerRecord& finished);
  void poll_stragglers();

  ElasticHooks hooks_;
  ElasticRunnerSide runner_;
  ElasticMembership membership_;
  boost::asio::steady_timer hosts_timer_;  // short of --min-np
  boost::asio::steady_timer straggler_timer_;  // --replace-stragglers
  // The process stopped as a straggler, until absorb() takes its exit in; -1: none.
  int replacing_ = -1;
  // The membership (by resets()) whose straggler evidence may be acted on: set when the
  // coordinator reports none, so that evidence about an earlier membership's rank numbers,
  // still reported until the coordinator opens the next, is never acted on.
  int straggler_membership_ = 0;
  int straggler_named_ = -1;  // the membership whose straggler was named without a spare
  std::vector<bool> handled_;              // by record: taken into the membership
  std::set<int> withdrawing_;              // stopped because the script no longer lists them
  std::set<int> added_;                    // started for slots the script added
  bool training_over_ = false;             // a rank exited 0: nothing more is added
  bool waiting_for_hosts_ = false;
  std::string discovery_error_;            // the last one said (each is said once)
  bool empty_said_ = false;                // "listed no host" was said
  // The script's latest output: offered again as soon as a host's health check passes.
  std::optional<Result<std::vector<HostSlots>>> last_discovered_;
};

}  // namespace hvrun::launcher

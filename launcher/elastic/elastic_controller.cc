#include "launcher/elastic/elastic_controller.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "launcher/supervisor/job_verdict.h"

namespace hvrun::launcher {

namespace {
std::string seconds_text(std::chrono::milliseconds ms) {
  return std::to_string(static_cast<int>(ms.count() / 1000));
}
}  // namespace

ElasticController::ElasticController(ElasticOptions options, ElasticHooks hooks,
                                     ElasticRunnerSide runner, boost::asio::io_context& io)
    : hooks_(std::move(hooks)),
      runner_(std::move(runner)),
      membership_(std::move(options)),
      hosts_timer_(io),
      straggler_timer_(io) {
  if (membership_.options().replace_stragglers && hooks_.straggler && runner_.stop)
    poll_stragglers();
}

void ElasticController::poll_stragglers() {
  straggler_timer_.expires_after(kStragglerPoll);
  straggler_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    check_stragglers();
    poll_stragglers();
  });
}

void ElasticController::check_stragglers() {
  if (training_over_ || waiting_for_hosts_ || runner_.ending() || replacing_ >= 0) return;
  const std::optional<coordinator::telemetry::StragglerEvidence> evidence = hooks_.straggler();
  if (!evidence) {
    straggler_membership_ = membership_.resets();
    return;
  }
  if (straggler_membership_ != membership_.resets()) return;  // about an earlier membership
  const auto& members = membership_.members();
  if (evidence->rank < 0 || static_cast<size_t>(evidence->rank) >= members.size()) return;
  const int id = members[static_cast<size_t>(evidence->rank)].id;
  const WorkerRecord& r = runner_.records()[static_cast<size_t>(id)];
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "by %.1f ms or more in %d of the last %d steps, %.1f ms",
                evidence->threshold_seconds * 1e3, evidence->late_steps, evidence->window,
                evidence->lateness_median_seconds * 1e3);
  const std::string named = "rank " + std::to_string(evidence->rank) + " on host " + r.host +
                            " (the worker started as rank " + std::to_string(r.rank) +
                            (r.pid > 0 ? ", pid " + std::to_string(r.pid) : std::string()) +
                            ") was last " + numbers + " late at the median (--replace-stragglers)";
  if (membership_.spares().empty()) {
    // Stopping it would shrink the job, which a slow rank does not justify.
    if (straggler_named_ == membership_.resets()) return;
    straggler_named_ = membership_.resets();
    runner_.say("elastic: " + named + "; no spare is ready, so it is not replaced");
    return;
  }
  replacing_ = id;
  runner_.say("elastic: " + named + ": stopping it (SIGTERM); a spare takes its place");
  runner_.stop(id);
}

namespace {

// How a worker ended: its exit once read, or the status it was seen dying with before that.
int end_status(const WorkerRecord& record) {
  return record.exited || record.dying_status < 0 ? record.wait_status : record.dying_status;
}

}  // namespace

std::string ElasticController::describe(const WorkerRecord& record) {
  // A rank whose host never got its agent has no process to speak of.
  const char* what = record.pid > 0 ? "the worker started as rank " : "the worker planned as rank ";
  return what + std::to_string(record.rank) + " on host " + record.host +
         (record.pid > 0 ? " (pid " + std::to_string(record.pid) + ")" : std::string()) + " " +
         (record.lost.empty() ? describe_wait_status(end_status(record)) : "was " + record.lost);
}

bool ElasticController::absorb() {
  if (runner_.ending()) return false;
  std::vector<WorkerRecord>& records = runner_.records();
  if (handled_.size() < records.size()) handled_.resize(records.size(), false);
  const auto now = ElasticMembership::Clock::now();
  std::string lost;
  std::string lost_host;
  std::string withdrawn;
  std::string withdrawn_host;
  std::vector<std::string> lost_hosts;
  int lost_count = 0;
  std::string spares_ended;
  for (size_t i = 0; i < records.size(); ++i) {
    const WorkerRecord& r = records[i];
    if (handled_[i] || (!r.exited && r.lost.empty() && r.dying_status < 0)) continue;
    handled_[i] = true;
    if (static_cast<int>(i) == replacing_) {
      // Stopped by hvrun as a straggler: however it ended, it is lost, and its host did not fail.
      replacing_ = -1;
      if (training_over_ || !membership_.remove_finished(static_cast<int>(i))) continue;
      if (!lost.empty()) lost += "; ";
      lost += "the worker started as rank " + std::to_string(r.rank) + " on host " + r.host +
              " was stopped as a straggler";
      lost_host = r.host;
      lost_hosts.push_back(r.host);
      ++lost_count;
      continue;
    }
    if (withdrawing_.erase(static_cast<int>(i)) > 0) {
      // Stopped by hvrun: however it ended, its host did not fail.
      if (!membership_.remove_finished(static_cast<int>(i))) continue;
      withdrawn += (withdrawn.empty() ? "the worker started as rank " : ", rank ") +
                   std::to_string(r.rank) + " on host " + r.host;
      withdrawn_host = r.host;
      continue;
    }
    if (membership_.is_spare(static_cast<int>(i))) {
      // A spare that ended held no rank: the membership stays as it is.
      if (r.lost.empty() && !is_failure(end_status(r)))
        membership_.remove_finished(static_cast<int>(i));
      else
        membership_.remove_failed(static_cast<int>(i), now);
      spares_ended += (spares_ended.empty() ? "" : "; ") + describe(r);
      continue;
    }
    if (r.lost.empty() && !is_failure(end_status(r))) {
      if (membership_.remove_finished(static_cast<int>(i)) && !training_over_) end_training(r);
      continue;
    }
    // Once the training is over a failure is the job's: no membership is left to go on with.
    if (training_over_) return false;
    if (!membership_.remove_failed(static_cast<int>(i), now)) continue;
    if (!lost.empty()) lost += "; ";
    lost += describe(r);
    lost_host = r.host;
    lost_hosts.push_back(r.host);
    ++lost_count;
  }
  if (!spares_ended.empty() && !training_over_)
    runner_.say("elastic: spare ended: " + spares_ended + "; " +
                std::to_string(membership_.spares().size()) + " spare(s) left");
  if (lost.empty() && !withdrawn.empty() && training_over_) {
    runner_.say("elastic: the training is over; stopped: " + withdrawn);
    return true;
  }
  if (lost.empty() && !withdrawn.empty()) {
    // Counted when the script's change was seen (on_discovered).
    const std::string why = "withdrawn, the discovery script no longer lists them: " + withdrawn;
    runner_.say("elastic: " + why + "; " + std::to_string(membership_.size()) + " ranks left");
    if (membership_.short_of_min()) {
      wait_for_hosts(why);
      return true;
    }
    hooks_.change_membership(membership_.plan(), why, withdrawn_host);
    return true;
  }
  if (lost.empty()) return true;
  if (!withdrawn.empty()) lost += "; withdrawn, the discovery script no longer lists them: " + withdrawn;
  const ElasticOptions& o = membership_.options();
  if (!membership_.count_reset()) {
    runner_.say("elastic: " + lost + "; --reset-limit " + std::to_string(o.reset_limit) +
                " reached");
    return false;
  }
  std::string blacklist;
  for (const std::string& host : membership_.failed_hosts(now)) blacklist += " " + host + ";";
  if (!blacklist.empty()) blacklist = "; blacklisted:" + blacklist;
  else blacklist = ";";
  const std::string promoted = promote_spares(lost_count, lost_hosts);
  runner_.say("elastic: " + lost + blacklist + " " +
              (promoted.empty() ? std::to_string(membership_.size()) + " ranks left"
                                : "spare(s) in the lost ranks' place: " + promoted + "; " +
                                      std::to_string(membership_.size()) + " ranks, " +
                                      std::to_string(membership_.spares().size()) +
                                      " spare(s) left"));
  if (membership_.short_of_min()) {
    wait_for_hosts(lost);
    return true;
  }
  hooks_.change_membership(membership_.plan(), lost, lost_host);
  return true;
}

std::string ElasticController::promote_spares(int count,
                                              const std::vector<std::string>& lost_hosts) {
  std::string promoted;
  for (int k = 0; k < count; ++k) {
    const std::optional<ElasticMembership::Member> spare = membership_.promote_spare(lost_hosts);
    if (!spare) break;
    const WorkerRecord& r = runner_.records()[static_cast<size_t>(spare->id)];
    promoted += (promoted.empty() ? "the worker started as rank " : ", rank ") +
                std::to_string(r.rank) + " on host " + r.host;
  }
  return promoted;
}

void ElasticController::top_up_spares(const std::vector<HostSlots>& hosts) {
  start_spares(membership_.spare_slots(hosts, ElasticMembership::Clock::now()));
}

void ElasticController::start_spares(const std::vector<ElasticSlot>& slots) {
  if (!runner_.start || training_over_) return;
  std::string where;
  for (const ElasticSlot& slot : slots) {
    const int id = runner_.start(slot, /*spare=*/true);
    if (id < 0) break;
    membership_.add_spare({id, slot});
    where += (where.empty() ? "" : ", ") + slot.host + " slot " + std::to_string(slot.local_rank);
  }
  if (where.empty()) return;
  runner_.say("elastic: spare(s) started (" + where + "), parked until a rank is lost; " +
              std::to_string(membership_.spares().size()) + " spare(s) ready");
}

void ElasticController::wait_for_hosts(const std::string& lost) {
  if (waiting_for_hosts_) return;
  const ElasticOptions& o = membership_.options();
  if (!runner_.start || o.discovery_script.empty()) {
    // Nothing can add ranks to this job (only a discovery script offers slots once it runs):
    // waiting would only delay the failure.
    runner_.fail("elastic: " + std::to_string(membership_.size()) +
                 " ranks, fewer than --min-np " + std::to_string(o.min_np) +
                 ", and this job cannot add ranks" +
                 (o.discovery_script.empty() ? " (no --host-discovery-script offers slots)" : "") +
                 "; lost: " + lost);
    return;
  }
  waiting_for_hosts_ = true;
  if (runner_.hold) runner_.hold(true);
  runner_.say("elastic: " + std::to_string(membership_.size()) + " ranks, fewer than --min-np " +
              std::to_string(o.min_np) + "; waiting up to " + seconds_text(o.timeout) +
              " s (--elastic-timeout) for hosts");
  hosts_timer_.expires_after(o.timeout);
  hosts_timer_.async_wait([this, lost](boost::system::error_code ec) {
    if (ec || !waiting_for_hosts_) return;
    waiting_for_hosts_ = false;
    const ElasticOptions& options = membership_.options();
    std::string hosts;
    for (const std::string& host : membership_.failed_hosts(ElasticMembership::Clock::now()))
      hosts += (hosts.empty() ? "" : "; ") + host;
    runner_.fail("elastic: " + std::to_string(membership_.size()) +
                 " ranks, fewer than --min-np " + std::to_string(options.min_np) +
                 ", and no host came back within " + seconds_text(options.timeout) +
                 " s (--elastic-timeout); lost: " + lost + "; failed hosts: " + hosts);
    if (runner_.hold) runner_.hold(false);
  });
}

void ElasticController::exited(int id) {
  if (training_over_ || runner_.ending()) return;
  const std::vector<WorkerRecord>& records = runner_.records();
  if (id < 0 || static_cast<size_t>(id) >= records.size()) return;
  const WorkerRecord& r = records[static_cast<size_t>(id)];
  if (!r.exited || !r.lost.empty() || is_failure(r.wait_status) || withdrawing_.count(id) > 0)
    return;
  if (id == replacing_) {
    // A straggler that ended cleanly on SIGTERM: absorb() hears failures only, yet its place
    // still goes to a spare.
    if (!absorb()) runner_.fail("elastic: the straggler stopped could not be replaced (see above)");
    return;
  }
  const auto& members = membership_.members();
  const bool member = std::any_of(members.begin(), members.end(),
                                  [id](const ElasticMembership::Member& m) { return m.id == id; });
  if (member) end_training(r);
}

void ElasticController::end_training(const WorkerRecord& finished) {
  training_over_ = true;
  stop_waiting();
  std::vector<ElasticSlot> formed;
  if (hooks_.formed) formed = hooks_.formed();
  std::vector<int> idle;
  for (const ElasticMembership::Member& m : membership_.members()) {
    if (added_.count(m.id) == 0 || withdrawing_.count(m.id) > 0) continue;
    if (std::find(formed.begin(), formed.end(), m.slot) == formed.end()) idle.push_back(m.id);
  }
  const size_t late = idle.size();
  // Spares never trained: nothing is left for them to wait for.
  for (const ElasticMembership::Member& m : membership_.spares())
    if (withdrawing_.count(m.id) == 0) idle.push_back(m.id);
  const size_t spares = idle.size() - late;
  runner_.say("elastic: the worker started as rank " + std::to_string(finished.rank) +
              " on host " + finished.host + " finished its training; the job ends with its ranks" +
              (late == 0 ? std::string() : ", and the " + std::to_string(late) +
                                               " worker(s) of slots added too late to join "
                                               "are stopped") +
              (spares == 0 ? std::string()
                           : "; its " + std::to_string(spares) + " spare(s) are stopped"));
  if (!runner_.stop) return;
  for (int id : idle) {
    withdrawing_.insert(id);
    runner_.stop(id);
  }
}

void ElasticController::stop_waiting() {
  waiting_for_hosts_ = false;
  if (runner_.hold) runner_.hold(false);
  hosts_timer_.cancel();
}

void ElasticController::withdraw_unlisted(const std::vector<HostSlots>& hosts) {
  if (!runner_.stop) return;
  std::vector<int> ids;
  std::string spares;
  for (int id : membership_.unlisted(hosts)) {
    if (withdrawing_.count(id) > 0) continue;
    if (!membership_.is_spare(id)) {
      ids.push_back(id);
      continue;
    }
    // A spare holds no rank: stopping it resets nobody.
    withdrawing_.insert(id);
    spares += (spares.empty() ? "" : ", ") + std::to_string(id);
    runner_.stop(id);
  }
  if (!spares.empty())
    runner_.say("elastic: the discovery script no longer lists the slots of spare(s) " + spares +
                ": stopping them (SIGTERM)");
  if (ids.empty()) return;
  if (!membership_.count_reset()) {
    runner_.fail("elastic: --reset-limit " + std::to_string(membership_.options().reset_limit) +
                 " reached (hosts were taken away)");
    return;
  }
  std::string which;
  for (int id : ids) {
    withdrawing_.insert(id);
    which += (which.empty() ? "" : ", ") + std::to_string(id);
  }
  runner_.say("elastic: the discovery script no longer lists the slots of process(es) " + which +
              ": stopping them (SIGTERM); the others reset from their last commit");
  for (int id : ids) runner_.stop(id);
}

void ElasticController::on_discovered(const Result<std::vector<HostSlots>>& hosts) {
  // Slots offered once a rank finished its training would only wait for a membership that
  // never comes.
  if (runner_.ending() || !runner_.start || training_over_) return;
  if (!hosts.is_ok()) {
    if (hosts.status().message() != discovery_error_) {
      discovery_error_ = hosts.status().message();
      runner_.say("elastic: " + discovery_error_ + "; the hosts known stay");
    }
    return;
  }
  discovery_error_.clear();
  last_discovered_ = hosts;
  if (hosts->empty()) {
    // Most likely a script that failed quietly: taking every rank away would end the job.
    if (!empty_said_) runner_.say("elastic: the discovery script listed no host; the hosts known stay");
    empty_said_ = true;
    return;
  }
  empty_said_ = false;
  withdraw_unlisted(*hosts);
  const auto now = ElasticMembership::Clock::now();
  // Short of --min-np the slots go to ranks first; spares come at a later run of the script.
  std::vector<ElasticSlot> spares;
  if (!membership_.short_of_min()) spares = membership_.spare_slots(*hosts, now);
  std::vector<ElasticSlot> slots = membership_.free_slots(*hosts, now);
  // A spare is checked as a rank is: one check of its host clears both.
  std::vector<ElasticSlot> wanted = spares;
  wanted.insert(wanted.end(), slots.begin(), slots.end());
  const std::set<std::string> cleared = cleared_hosts(wanted);
  start_spares(on_hosts(cleared, spares));
  slots = on_hosts(cleared, slots);
  if (slots.empty()) return;
  if (!membership_.count_reset()) {
    runner_.fail("elastic: --reset-limit " + std::to_string(membership_.options().reset_limit) +
                 " reached (hosts were added)");
    return;
  }
  int added = 0;
  std::string where;
  for (const ElasticSlot& slot : slots) {
    const int id = runner_.start(slot, /*spare=*/false);
    if (id < 0) break;
    membership_.add({id, slot});
    added_.insert(id);
    ++added;
    where += (where.empty() ? "" : ", ") + slot.host + " slot " + std::to_string(slot.local_rank);
  }
  if (added == 0) return;
  runner_.say("elastic: " + std::to_string(added) + " rank(s) added (" + where + "); " +
              std::to_string(membership_.size()) + " ranks at the next reset");
  if (waiting_for_hosts_) {
    if (membership_.short_of_min()) return;
    stop_waiting();
    hooks_.change_membership(membership_.plan(), "slots were added", "");
    return;
  }
  hooks_.add_slots(membership_.plan(), added);
}

std::set<std::string> ElasticController::cleared_hosts(const std::vector<ElasticSlot>& slots) {
  std::map<std::string, int> per_host;
  for (const ElasticSlot& slot : slots) ++per_host[slot.host];
  std::set<std::string> cleared;
  // Asked once per host: a clearance is used up by the workers it lets start.
  for (const auto& [host, count] : per_host)
    if (!runner_.host_cleared || runner_.host_cleared(host, count)) cleared.insert(host);
  return cleared;
}

std::vector<ElasticSlot> ElasticController::on_hosts(const std::set<std::string>& hosts,
                                                     const std::vector<ElasticSlot>& slots) {
  std::vector<ElasticSlot> out;
  for (const ElasticSlot& slot : slots)
    if (hosts.count(slot.host) > 0) out.push_back(slot);
  return out;
}

void ElasticController::on_host_checked(const std::string& host, bool healthy,
                                        const std::string& reason) {
  if (runner_.ending() || training_over_) return;
  if (healthy) {
    if (last_discovered_) on_discovered(*last_discovered_);
    return;
  }
  const auto now = ElasticMembership::Clock::now();
  membership_.blacklist(host, now, "failed its health check: " + reason);
  runner_.say("elastic: host " + host + " failed its health check: " + reason +
              "; no rank is started there (" + membership_.blacklisting(host, now) + ")");
}

}  // namespace hvrun::launcher

// The coordinator's gRPC service, runnable in-process (hvrun starts it before its workers) or as
// the standalone daemon hvrun-coordinator (for jobs that mpirun, Slurm or Kubernetes start).
//
// Threads: start() spins up gRPC's own threads; abort(), address(), wait_for_end() and shutdown()
// may be called from any thread. The event callback runs on a coordinator thread and must not
// block (post to your own loop).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/status.h"
#include "coordinator/rendezvous/rendezvous.h"
#include "coordinator/telemetry/job_telemetry.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator {

struct CoordinatorOptions {
  // "127.0.0.1:0" (loopback, free port) for single-host jobs; "unix:/path" for a unix socket;
  // "ADDR:PORT" on the chosen interface for multi-host jobs.
  std::string listen_address = "127.0.0.1:0";
  std::string secret;                 // required on every call (metadata "x-hvrun-secret")
  std::string job_id;                 // names per-job resources; made up when empty
  int world_size = 0;                 // number of ranks expected to register
  std::vector<PlannedRank> plan;      // empty, or world_size entries
  std::chrono::milliseconds start_timeout{30000};  // counted from the first registration
  int64_t fusion_threshold_bytes = 128LL << 20;    // 0 = fusion off
  std::chrono::microseconds cycle_time{1000};
  int cache_capacity = 1024;          // 0 = cache off
  // A tensor submitted by some ranks and waiting this long for the others: a warning naming the
  // missing ranks; after stall_shutdown (0 = never) the job is aborted with that message.
  std::chrono::milliseconds stall_warning{60000};  // 0 = no warning
  std::chrono::milliseconds stall_shutdown{600000};
  // One name submitted as different ops by ranks idle this long fails on every rank
  // (NegotiationEngine::fail_op_mismatches); 0 = never.
  std::chrono::milliseconds op_mismatch_grace{2000};
  // A worker whose stream stays silent (no heartbeat, no request) this long aborts the job,
  // naming its rank and host. 0 = never.
  std::chrono::milliseconds heartbeat_timeout{30000};
  bool join_average_all = false;      // Average while ranks joined: divide by all ranks
  // Autopsies (proto/hvrun.proto "Autopsy"): one on a stall warning and before a stall-shutdown
  // or heartbeat abort, which waits for it (--autopsy); and how long one waits for the ranks'
  // answers (--autopsy-deadline-seconds).
  bool autopsy_on_stall = true;
  std::chrono::milliseconds autopsy_deadline{3000};
  // Non-empty: write the job's timeline (Chrome trace JSON) to this file from the start
  // (--timeline-filename; coordinator/telemetry/timeline_writer.h).
  std::string timeline_filename;
  bool timeline_horovod_names = false;  // --timeline-names horovod (telemetry/horovod_event_names.h)
  // Warn when one rank is this late in most recent steps (telemetry/straggler_tracker.h); 0 = off.
  std::chrono::microseconds straggler_warning{0};
  // --replace-stragglers: report a rank last by this much in most of the last `window` steps
  // (JobTelemetry::replaceable_straggler); window 0 = never.
  std::chrono::microseconds straggler_replace_threshold{0};
  size_t straggler_replace_window = 0;
  // Elastic jobs (--min-np, --max-np, --host-discovery-script): a lost rank ends only its
  // membership, not the job. The survivors hear a JobAbort marked membership_changed, register
  // again, and wait (at most elastic_timeout) for the owner to name the next membership
  // (change_membership). world_size and plan are the first membership's.
  bool elastic = false;
  std::chrono::milliseconds elastic_timeout{600000};
  // Effective settings handed to every worker at registration (registry name -> text).
  std::map<std::string, std::string> job_settings;

  // Fills the tunables from the registry (start timeout, fusion, cycle, cache, stall thresholds,
  // job settings).
  static CoordinatorOptions from_settings(const Settings& settings);
};

// What the coordinator tells its owner (the launcher) about the job's life.
struct CoordinatorEvent {
  enum class Kind {
    kRegistrationComplete,  // every rank registered
    kRegistrationFailed,    // start timeout: message names the missing ranks and hosts
    kAborted,               // a worker, an agent or the launcher aborted the job
    kWorkerLost,            // a worker's stream ended without a Goodbye (kAborted follows,
                            // except in elastic jobs: kMembershipEnded)
    kMembershipEnded,       // elastic: a lost rank ended the membership; survivors re-register
    kJobFinished,           // every rank said Goodbye: the job ended cleanly
    kAutopsy,               // an autopsy is complete: `autopsy` holds every rank's answer
  };
  Kind kind;
  std::string message;
  int rank = -1;
  std::string host;
  // kAutopsy: the job report, without the verdict and the process states of ranks that did
  // not answer (the launcher, which can see their processes, adds them).
  std::shared_ptr<const v1::AutopsyJobReport> autopsy;
};

// Why the coordinator ended the job: the first abort(), or the rendezvous failing by itself.
struct AbortCause {
  std::string reason;
  int rank = -1;  // the rank it names, -1 for none
  std::string host;
  bool at_registration = false;  // the rendezvous failed (timed out, a rank exited before it)
  // A rank said goodbye while others waited for a collective it never submitted: the job was
  // not ended for it (the waiting ranks' collectives failed, naming it; they may go on, or
  // init again), but if the job fails after it, that departure is the first cause.
  bool departure = false;
};

class CoordinatorServer {
 public:
  using EventCallback = std::function<void(const CoordinatorEvent&)>;

  // Binds, starts serving and returns. Fails with a readable message (address in use, ...).
  static Result<std::unique_ptr<CoordinatorServer>> start(CoordinatorOptions options,
                                                          EventCallback on_event = nullptr);

  virtual ~CoordinatorServer() = default;

  // The address workers dial, with the real port: "127.0.0.1:40123" or "unix:/path".
  virtual std::string address() const = 0;
  virtual const std::string& job_id() const = 0;

  // Job-wide abort: every connected worker receives JobAbort with this reason at once, and
  // workers connecting later are refused with it. Idempotent; the first reason wins.
  virtual void abort(const std::string& reason, int rank = -1, const std::string& host = "") = 0;

  // Why the coordinator ended the job, or nullopt while it did not; or a rank's departure that
  // failed its peers' collectives (AbortCause::departure), which came before anything it
  // caused. It is recorded before any worker hears of it, so a worker's exit that followed
  // always finds it: the launcher tells a consequence from the cause with it.
  virtual std::optional<AbortCause> abort_cause() const { return std::nullopt; }

  // The launcher saw rank `rank`'s process end (`how`: "exited with code 0", ...). A rank that
  // ends before registering fails the rendezvous at once, naming it, as soon as some rank has
  // registered (a job whose commands never use the worker library is not failed by it).
  virtual void worker_exited(int rank, const std::string& how) {
    (void)rank;
    (void)how;
  }

  // Asks every rank for an autopsy (`trigger` says why: "SIGUSR1 to hvrun"); the result comes
  // as a kAutopsy event. False when one is under way, or the job is not running.
  virtual bool request_autopsy(const std::string& trigger) {
    (void)trigger;
    return false;
  }

  // Elastic jobs: the next membership is `plan` (its ranks in order: survivors by their rank in
  // this one, then added slots). A rank was lost (`reason`, naming `rank` on `host`): the
  // current membership, unless the coordinator already ended it when that rank's stream broke,
  // ends at once (every survivor's pending collectives fail with the reason); the survivors'
  // registrations then land in the next one. Ignored once the job ended.
  virtual void change_membership(std::vector<PlannedRank> plan, const std::string& reason,
                                 int rank, const std::string& host) {
    (void)plan;
    (void)reason;
    (void)rank;
    (void)host;
  }
  // Elastic jobs: slots were added. The next membership is `plan` (the current ranks first);
  // every rank hears HostsUpdated and resets at its next commit, and the next membership opens
  // once every rank of this one said Goodbye.
  virtual void add_slots(std::vector<PlannedRank> plan, int added) {
    (void)plan;
    (void)added;
  }

  // Elastic jobs: the slots of the latest membership whose ranks all registered (empty
  // before the first): a worker of a slot not among them never trained in this job.
  virtual std::vector<PlannedRank> formed_membership() const { return {}; }

  // Ranks that registered (the rendezvous completed) but have not opened their negotiation
  // stream yet: after an abort, ranks that would hear why only if the server still answers.
  virtual std::vector<int> registered_without_stream() { return {}; }

  // Stops serving (in-flight calls are cancelled). Idempotent; also done by the destructor.
  virtual void shutdown() = 0;

  // Waits at most `timeout` for the job to end: OK when every rank said Goodbye, the abort's
  // ABORTED status, or the rendezvous' DEADLINE_EXCEEDED. nullopt while the job still runs.
  virtual std::optional<Status> wait_for_end(std::chrono::milliseconds timeout) = 0;

  // Any thread: what the ranks are doing now (coordinator/telemetry/job_telemetry.h). Cheap
  // enough for a Prometheus scrape; stays readable after the job ended (for the summary).
  virtual telemetry::JobTelemetry telemetry() const { return {}; }
};

}  // namespace hvrun::coordinator

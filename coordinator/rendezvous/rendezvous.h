// Rendezvous: workers register, get their rank and topology once every rank has arrived, or a
// message naming the missing ranks when the start timeout (counted from the first registration)
// passes.
//
// Ranks: the launcher's plan (host, local rank) when there is one; else the rank the worker
// requested (its launcher's environment); else the lowest free rank, in order of registration.
//
// Threads: every method may be called from any thread (guarded by mutex_). register_worker()
// blocks its caller until the rendezvous ends; register_async() returns at once and calls back
// when it ends, from the thread that ended it (the last registration, an abort, an exit, or the
// rendezvous's own deadline thread), so that thousands of waiting ranks hold no thread each.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator {

// Where the launcher plans rank r to run. Empty plan: ranks come from the workers' requests
// (requested_rank from their environment) or are assigned in order of registration.
struct PlannedRank {
  std::string host;
  int local_rank = 0;
};

struct Registered {
  v1::Topology topology;
  // Every rank's host (a serialized v1::HostPlacement): one copy for the whole job, built when
  // the rendezvous completes.
  std::shared_ptr<const std::string> placement;
  std::string job_id;  // filled by the job: what names this membership's resources
};

// How the ranks are assigned.
enum class RankRules {
  kLaunch,   // the plan, else the requested rank, else in order of registration (see above)
  // Elastic memberships after the first: the plan alone decides (a survivor's launch-time rank
  // is stale), and local ranks are renumbered 0..k-1 per host in rank order.
  kMembership,
};

class Rendezvous {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once, outside the lock, when the rendezvous completes (OK) or fails (the error).
  using Listener = std::function<void(const Status&)>;
  // A registration's answer: the worker's place once every rank is in, or why not.
  using Done = std::function<void(Result<Registered>)>;

  Rendezvous(int world_size, std::vector<PlannedRank> plan, std::chrono::milliseconds start_timeout,
             Listener on_end, RankRules rules = RankRules::kLaunch);
  // Answers registrations still waiting with CANCELLED.
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Registers a worker and waits for the others (bounded by the start timeout).
  Result<Registered> register_worker(const v1::WorkerInfo& worker);
  // The same without waiting: `done` gets the answer, at once when the registration fails or
  // ends the rendezvous, else when the rendezvous ends (after the end listener).
  void register_async(const v1::WorkerInfo& worker, Done done);

  // Fails the rendezvous if the start timeout has passed; returns whether it has ended.
  // (Waiting workers check this themselves; the service's loop calls it as a backstop.)
  bool check_deadline(Clock::time_point now);

  // Rank `rank`'s process ended (`how`, for the message). If it has not registered, it never
  // will: the rendezvous fails naming it, at once when some worker has registered, else at the
  // first registration. Without a plan ranks are assigned on completion, so nothing is known.
  void rank_exited(int rank, const std::string& how);

  // Fails waiting and later registrations with `status` (job aborted).
  void abort(const Status& status);

  // Why the rendezvous failed by itself (timed out, a rank exited, ranks that do not fit
  // together) and the rank that names best (-1: none); nullopt while it runs, after success
  // and when it was aborted or cancelled from outside. Set before any waiter is woken.
  struct Failure {
    std::string message;
    int rank = -1;
  };
  std::optional<Failure> failure() const;

  bool complete() const;
  // The rank's registration; nullopt before the rendezvous completes.
  std::optional<v1::RankInfo> rank_info(int rank) const;

 private:
  Status claim_rank(const v1::WorkerInfo& worker, int* slot);  // requires mutex_
  // Requires mutex_: refuses a registration after the end, claims its rank and sets the start
  // deadline, and ends the rendezvous when this was the last rank (or a rank already exited).
  Status join_locked(const v1::WorkerInfo& worker, int* slot, std::vector<Listener>* to_call);
  void finish_locked();                                        // requires mutex_
  std::string missing_message() const;                         // requires mutex_
  std::string exited_message() const;                          // requires mutex_
  Status check_consistency_locked() const;  // NCCL versions, GPUs; requires mutex_
  int first_missing_rank_locked() const;                       // requires mutex_
  // Requires mutex_. `rank`: the rank a failure names best, -1 for none.
  void end_locked(Status status, std::vector<Listener>* to_call, int rank = -1);
  // What to tell each asynchronous registration once the rendezvous has ended (taken out of
  // waiting_); empty before. Requires mutex_; run the answers after unlocking.
  using Answers = std::vector<std::pair<Done, Result<Registered>>>;
  Answers take_answers_locked();
  Result<Registered> answer_locked(int slot) const;  // requires mutex_, ended_
  // The asynchronous registrations' start timeout (their callers do not wait to see it).
  void watch_deadline();
  static void deliver(const std::vector<Listener>& listeners, const Status& status,
                      Answers answers);

  const int world_size_;
  const std::vector<PlannedRank> plan_;
  const std::map<std::pair<std::string, int>, int> planned_rank_;  // (host, local rank) -> rank
  const std::chrono::milliseconds start_timeout_;
  const RankRules rules_;

  mutable std::mutex mutex_;
  std::condition_variable ended_cv_;
  Listener on_end_;                               // guarded by mutex_; taken once
  std::vector<v1::WorkerInfo> workers_;           // by registration order
  std::vector<int> rank_of_worker_;               // -1 until assigned
  std::vector<int> worker_of_rank_;               // -1 until claimed
  std::optional<Clock::time_point> deadline_;     // set by the first registration
  std::vector<std::pair<int, std::string>> exited_unregistered_;  // rank, how it ended
  bool ended_ = false;
  Status end_status_;                             // after ended_: OK or why it failed
  int failure_rank_ = -1;                         // after a failure: the rank it names
  std::vector<v1::Topology> topology_;            // by rank, after success
  std::vector<v1::RankInfo> ranks_;               // by rank, after success
  std::shared_ptr<const std::string> placement_;  // after success, serialized
  std::vector<std::pair<int, Done>> waiting_;     // asynchronous registrations: slot, answer
  bool stopping_ = false;                         // the destructor runs
  std::thread deadline_thread_;                   // started by the first register_async()
};

}  // namespace hvrun::coordinator

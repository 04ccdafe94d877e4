#include "coordinator/rendezvous/rendezvous.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace hvrun::coordinator {

namespace {
std::string describe_worker(const v1::WorkerInfo& w) {
  return "host " + w.host() + " pid " + std::to_string(w.pid());
}

std::map<std::pair<std::string, int>, int> index_plan(const std::vector<PlannedRank>& plan) {
  std::map<std::pair<std::string, int>, int> rank_of;
  for (int r = 0; r < static_cast<int>(plan.size()); ++r)
    rank_of[{plan[r].host, plan[r].local_rank}] = r;
  return rank_of;
}
}  // namespace

Rendezvous::Rendezvous(int world_size, std::vector<PlannedRank> plan,
                       std::chrono::milliseconds start_timeout, Listener on_end, RankRules rules)
    : world_size_(world_size),
      plan_(std::move(plan)),
      planned_rank_(index_plan(plan_)),
      start_timeout_(start_timeout),
      rules_(rules),
      on_end_(std::move(on_end)),
      worker_of_rank_(world_size, -1) {}

Status Rendezvous::claim_rank(const v1::WorkerInfo& worker, int* slot) {
  const int index = static_cast<int>(workers_.size());
  int rank = rules_ == RankRules::kMembership ? -1 : worker.requested_rank();
  if (rank < 0 && !plan_.empty()) {
    if (auto planned = planned_rank_.find({worker.host(), worker.local_rank()});
        planned != planned_rank_.end())
      rank = planned->second;
    if (rank < 0) {
      return invalid_argument("worker on " + describe_worker(worker) + " (local rank " +
                              std::to_string(worker.local_rank()) +
                              ") matches no slot of the launcher's plan; check HVRUN_HOST and "
                              "HVRUN_LOCAL_RANK");
    }
  }
  if (rank >= world_size_) {
    return invalid_argument("worker on " + describe_worker(worker) + " asked for rank " +
                            std::to_string(rank) + ", but the job has " +
                            std::to_string(world_size_) + " ranks (0-" +
                            std::to_string(world_size_ - 1) + ")");
  }
  if (rank >= 0 && worker_of_rank_[rank] >= 0) {
    return already_exists("rank " + std::to_string(rank) + " registered twice: first by " +
                          describe_worker(workers_[worker_of_rank_[rank]]) + ", now by " +
                          describe_worker(worker) + "; check each worker's HVRUN_RANK");
  }
  if (index >= world_size_) {
    return resource_exhausted("worker on " + describe_worker(worker) +
                              " registered, but all " + std::to_string(world_size_) +
                              " ranks of the job are taken; check -np / --world-size");
  }
  workers_.push_back(worker);
  rank_of_worker_.push_back(rank);
  if (rank >= 0) worker_of_rank_[rank] = index;
  *slot = index;
  return Status::ok();
}

void Rendezvous::finish_locked() {
  // Workers that asked for no rank take the free ones, in order of registration.
  int next_free = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (rank_of_worker_[i] >= 0) continue;
    while (worker_of_rank_[next_free] >= 0) ++next_free;
    rank_of_worker_[i] = next_free;
    worker_of_rank_[next_free] = static_cast<int>(i);
  }
  // Hosts in order of their lowest rank; local ranks as planned, as given, or in rank order.
  std::vector<std::string> host_order;
  std::map<std::string, std::vector<int>> ranks_on_host;
  auto placement = std::make_shared<v1::HostPlacement>();
  {
    std::map<std::string, uint32_t> index_of_host;
    for (int r = 0; r < world_size_; ++r) {
      const auto& host = workers_[worker_of_rank_[r]].host();
      auto [it, added] = index_of_host.try_emplace(host, static_cast<uint32_t>(host_order.size()));
      if (added) {
        host_order.push_back(host);
        placement->add_hosts(host);
      }
      ranks_on_host[host].push_back(r);
      placement->add_host_of_rank(it->second);
    }
  }
  std::vector<int> local_rank(world_size_);
  for (const auto& [host, on_host] : ranks_on_host) {
    for (size_t i = 0; i < on_host.size(); ++i) {
      const int r = on_host[i];
      const v1::WorkerInfo& w = workers_[worker_of_rank_[r]];
      const int in_rank_order = static_cast<int>(i);  // on_host is in rank order
      if (rules_ == RankRules::kMembership) {
        local_rank[r] = in_rank_order;
      } else if (!plan_.empty()) {
        local_rank[r] = plan_[r].local_rank;
      } else if (w.local_rank() >= 0) {
        local_rank[r] = w.local_rank();
      } else {
        local_rank[r] = in_rank_order;
      }
    }
  }
  // A rank's cross rank: its host's place among the hosts (in host order) that have a rank of
  // its local rank; the cross size: how many such hosts there are.
  std::map<int, std::vector<int>> hosts_with_local_rank;  // local rank -> host positions
  for (size_t h = 0; h < host_order.size(); ++h) {
    std::vector<int> seen;
    for (int r : ranks_on_host[host_order[h]]) seen.push_back(local_rank[r]);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int l : seen) hosts_with_local_rank[l].push_back(static_cast<int>(h));
  }
  topology_.assign(world_size_, {});
  ranks_.assign(world_size_, {});
  for (int r = 0; r < world_size_; ++r) {
    const v1::WorkerInfo& w = workers_[worker_of_rank_[r]];
    const std::vector<int>& hosts = hosts_with_local_rank[local_rank[r]];
    const int host_position = static_cast<int>(placement->host_of_rank(r));
    v1::Topology& t = topology_[r];
    t.set_rank(r);
    t.set_size(world_size_);
    t.set_local_rank(local_rank[r]);
    t.set_local_size(static_cast<int>(ranks_on_host[w.host()].size()));
    t.set_cross_rank(static_cast<int>(std::lower_bound(hosts.begin(), hosts.end(), host_position) -
                                      hosts.begin()));
    t.set_cross_size(static_cast<int>(hosts.size()));
    v1::RankInfo& info = ranks_[r];
    info.set_rank(r);
    info.set_host(w.host());
    info.set_local_rank(local_rank[r]);
    info.set_pid(w.pid());
  }
  placement_ = std::make_shared<const std::string>(placement->SerializeAsString());
}

Status Rendezvous::check_consistency_locked() const {
  // One NCCL version per job: ranks built against different NCCLs hang or crash in collectives.
  std::map<int, std::vector<int>> ranks_by_nccl;
  for (int r = 0; r < world_size_; ++r) {
    const int version = workers_[worker_of_rank_[r]].nccl_version();
    if (version != 0) ranks_by_nccl[version].push_back(r);
  }
  if (ranks_by_nccl.size() > 1) {
    std::string detail;
    for (const auto& [version, ranks] : ranks_by_nccl) {
      detail += (detail.empty() ? "" : "; ") + std::string("NCCL ") + std::to_string(version) +
                " on rank(s) ";
      for (size_t i = 0; i < ranks.size(); ++i) detail += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return failed_precondition("ranks use different NCCL versions (" + detail +
                               "); install one NCCL everywhere");
  }
  // One GPU per rank: two ranks of a host on one GPU means the pinning went wrong.
  std::map<std::pair<std::string, std::string>, int> rank_of_gpu;
  for (int r = 0; r < world_size_; ++r) {
    const v1::WorkerInfo& w = workers_[worker_of_rank_[r]];
    const std::string& gpu = !w.gpu_uuid().empty() ? w.gpu_uuid() : w.pci_bus_id();
    if (gpu.empty()) continue;
    auto [it, added] = rank_of_gpu.try_emplace({w.host(), gpu}, r);
    if (!added) {
      return failed_precondition("ranks " + std::to_string(it->second) + " and " +
                                 std::to_string(r) + " on host " + w.host() +
                                 " both use GPU " + gpu +
                                 "; each rank needs its own GPU (check --gpu-pinning and "
                                 "CUDA_VISIBLE_DEVICES)");
    }
  }
  return Status::ok();
}

std::string Rendezvous::missing_message() const {
  std::string missing;
  int unclaimed = 0;
  for (int r = 0; r < world_size_; ++r) {
    if (worker_of_rank_[r] >= 0) continue;
    ++unclaimed;
    if (!missing.empty()) missing += ", ";
    missing += "rank " + std::to_string(r);
    if (!plan_.empty()) {
      missing += " (host " + plan_[r].host + ", local rank " + std::to_string(plan_[r].local_rank) + ")";
    }
  }
  const int registered = static_cast<int>(workers_.size());
  std::ostringstream seconds;
  seconds << start_timeout_.count() / 1000.0;
  std::string message = "rendezvous timed out after " + seconds.str() + " s: " +
                        std::to_string(registered) + " of " + std::to_string(world_size_) +
                        " ranks registered; ";
  if (plan_.empty() && registered > world_size_ - unclaimed) {
    message += std::to_string(world_size_ - registered) + " more worker(s) expected; unclaimed ";
  } else {
    message += "missing ";
  }
  message += missing + ". Did those workers start (check their output), can they reach the "
             "coordinator, and do they use the job's secret? Raise --start-timeout if they are "
             "just slow";
  return message;
}

std::string Rendezvous::exited_message() const {
  std::string who;
  for (const auto& [rank, how] : exited_unregistered_) {
    if (!who.empty()) who += "; ";
    who += "rank " + std::to_string(rank) + " (host " + plan_[rank].host + ", local rank " +
           std::to_string(plan_[rank].local_rank) + ") " + how;
  }
  return who + " before registering with the coordinator, so the job cannot start: every rank "
               "must call init (see that rank's output)";
}

int Rendezvous::first_missing_rank_locked() const {
  for (int r = 0; r < world_size_; ++r)
    if (worker_of_rank_[r] < 0) return r;
  return -1;
}

void Rendezvous::end_locked(Status status, std::vector<Listener>* to_call, int rank) {
  if (ended_) return;
  ended_ = true;
  end_status_ = std::move(status);
  failure_rank_ = rank;
  if (on_end_) to_call->push_back(std::move(on_end_));
  on_end_ = nullptr;
  ended_cv_.notify_all();
}

Status Rendezvous::join_locked(const v1::WorkerInfo& worker, int* slot,
                               std::vector<Listener>* to_call) {
  if (ended_) {
    if (!end_status_.is_ok()) return end_status_;
    return failed_precondition("worker on " + describe_worker(worker) +
                               " registered after the rendezvous completed; every rank is "
                               "already taken");
  }
  HVRUN_RETURN_IF_ERROR(claim_rank(worker, slot));
  if (!deadline_) deadline_ = Clock::now() + start_timeout_;
  if (!exited_unregistered_.empty()) {
    end_locked(failed_precondition(exited_message()), to_call, exited_unregistered_.front().first);
  } else if (static_cast<int>(workers_.size()) == world_size_) {
    finish_locked();
    end_locked(check_consistency_locked(), to_call);
  }
  return Status::ok();
}

Result<Registered> Rendezvous::register_worker(const v1::WorkerInfo& worker) {
  std::vector<Listener> to_call;
  std::unique_lock<std::mutex> lock(mutex_);
  int slot = -1;
  HVRUN_RETURN_IF_ERROR(join_locked(worker, &slot, &to_call));
  while (!ended_) {
    if (ended_cv_.wait_until(lock, *deadline_) == std::cv_status::timeout && !ended_ &&
        Clock::now() >= *deadline_) {
      end_locked(deadline_exceeded(missing_message()), &to_call, first_missing_rank_locked());
    }
  }
  const Status status = end_status_;
  Result<Registered> result = answer_locked(slot);
  Answers answers = take_answers_locked();
  lock.unlock();
  deliver(to_call, status, std::move(answers));
  return result;
}

Result<Registered> Rendezvous::answer_locked(int slot) const {
  if (!end_status_.is_ok()) return end_status_;
  Registered result;
  result.topology = topology_[rank_of_worker_[slot]];
  result.placement = placement_;
  return result;
}

Rendezvous::Answers Rendezvous::take_answers_locked() {
  Answers answers;
  if (!ended_) return answers;
  for (auto& [slot, done] : waiting_) answers.emplace_back(std::move(done), answer_locked(slot));
  waiting_.clear();
  return answers;
}

void Rendezvous::deliver(const std::vector<Listener>& listeners, const Status& status,
                         Answers answers) {
  for (const auto& listener : listeners) listener(status);
  for (auto& [done, answer] : answers) done(std::move(answer));
}

void Rendezvous::register_async(const v1::WorkerInfo& worker, Done done) {
  std::vector<Listener> to_call;
  Answers answers;
  Status status;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    int slot = -1;
    if (Status joined = join_locked(worker, &slot, &to_call); !joined.is_ok()) {
      lock.unlock();
      return done(std::move(joined));
    }
    waiting_.emplace_back(slot, std::move(done));
    if (!ended_ && !deadline_thread_.joinable())
      deadline_thread_ = std::thread([this] { watch_deadline(); });
    status = end_status_;
    answers = take_answers_locked();
  }
  deliver(to_call, status, std::move(answers));
}

void Rendezvous::watch_deadline() {
  std::vector<Listener> to_call;
  Answers answers;
  Status status;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!ended_ && !stopping_) {
      if (ended_cv_.wait_until(lock, *deadline_) == std::cv_status::timeout && !ended_ &&
          !stopping_ && Clock::now() >= *deadline_)
        end_locked(deadline_exceeded(missing_message()), &to_call, first_missing_rank_locked());
    }
    status = end_status_;
    answers = take_answers_locked();
  }
  deliver(to_call, status, std::move(answers));
}

Rendezvous::~Rendezvous() {
  Answers answers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    ended_cv_.notify_all();
    for (auto& [slot, done] : waiting_)
      answers.emplace_back(std::move(done), cancelled("the coordinator shut down during the "
                                                      "rendezvous"));
    waiting_.clear();
  }
  if (deadline_thread_.joinable()) deadline_thread_.join();
  deliver({}, Status::ok(), std::move(answers));
}

bool Rendezvous::check_deadline(Clock::time_point now) {
  std::vector<Listener> to_call;
  Answers answers;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ended_ && deadline_ && now >= *deadline_)
      end_locked(deadline_exceeded(missing_message()), &to_call, first_missing_rank_locked());
    status = end_status_;
    answers = take_answers_locked();
    if (to_call.empty() && answers.empty()) return ended_;
  }
  deliver(to_call, status, std::move(answers));
  return true;
}

void Rendezvous::rank_exited(int rank, const std::string& how) {
  std::vector<Listener> to_call;
  Answers answers;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ || plan_.empty() || rank < 0 || rank >= world_size_ || worker_of_rank_[rank] >= 0)
      return;
    for (const auto& [r, ignored] : exited_unregistered_)
      if (r == rank) return;
    exited_unregistered_.emplace_back(rank, how);
    if (!deadline_) return;  // nobody registered yet: maybe no rank uses the worker library
    end_locked(failed_precondition(exited_message()), &to_call, exited_unregistered_.front().first);
    status = end_status_;
    answers = take_answers_locked();
  }
  deliver(to_call, status, std::move(answers));
}

void Rendezvous::abort(const Status& status) {
  std::vector<Listener> to_call;
  Answers answers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    end_locked(status, &to_call);
    answers = take_answers_locked();
  }
  deliver(to_call, status, std::move(answers));
}

std::optional<Rendezvous::Failure> Rendezvous::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ended_ || end_status_.is_ok() || end_status_.code() == StatusCode::kAborted ||
      end_status_.code() == StatusCode::kCancelled)
    return std::nullopt;
  return Failure{end_status_.message(), failure_rank_};
}

bool Rendezvous::complete() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_ && end_status_.is_ok();
}

std::optional<v1::RankInfo> Rendezvous::rank_info(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ended_ || !end_status_.is_ok() || rank < 0 || rank >= world_size_) return std::nullopt;
  return ranks_[rank];
}

}  // namespace hvrun::coordinator

#include "launcher/supervisor/job_verdict.h"

#include <sys/wait.h>

namespace hvrun::launcher {

bool is_failure(int wait_status) {
  return !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

JobEnd worker_failure(const WorkerRecord& worker) {
  JobEnd end;
  end.kind = JobEndKind::kWorkerFailed;
  end.rank = worker.rank;
  if (WIFSIGNALED(worker.wait_status)) {
    end.signal = WTERMSIG(worker.wait_status);
    end.exit_code = 128 + end.signal;
  } else {
    end.exit_code = WEXITSTATUS(worker.wait_status);
  }
  const std::string who = worker.label.empty()
                              ? "rank " + std::to_string(worker.rank) + " on " + worker.host
                              : worker.label;
  if (!worker.label.empty()) end.rank = -1;
  end.message =
      who + " (pid " + std::to_string(worker.pid) + ") " + describe_wait_status(worker.wait_status);
  return end;
}

JobEnd first_cause(const JobEnd& seen, const std::optional<CoordinatorVerdict>& verdict,
                   const std::vector<WorkerRecord>& workers) {
  if (!verdict) return seen;
  const int r = verdict->rank;
  if (r >= 0 && static_cast<size_t>(r) < workers.size()) {
    const WorkerRecord& named = workers[static_cast<size_t>(r)];
    if (named.exited && is_failure(named.wait_status) && !named.signalled_by_hvrun) {
      JobEnd end = worker_failure(named);
      end.message += " (coordinator: " + verdict->reason + ")";
      return end;
    }
  }
  const char* what = verdict->at_registration ? "registration failed: "
                     : verdict->departure     ? ""
                                              : "job aborted: ";
  return JobEnd{JobEndKind::kControlPlane, r, 1, 0, what + verdict->reason};
}

bool awaits_named_rank(const JobEnd& end, const std::vector<WorkerRecord>& workers) {
  if (end.kind != JobEndKind::kControlPlane || end.rank < 0 ||
      static_cast<size_t>(end.rank) >= workers.size())
    return false;
  const WorkerRecord& named = workers[static_cast<size_t>(end.rank)];
  return named.pid > 0 && !named.exited && named.lost.empty();
}

}  // namespace hvrun::launcher

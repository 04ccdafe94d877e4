// hvrun --max-restarts: whether a failed job is started again, and the story of its restarts.
//
// A job that fails is started again, on the same hosts, while restarts remain — unless hvrun
// itself was stopped (SIGINT/SIGTERM), or the job failed the same way twice in a row within a
// short time of starting (a restart would only repeat it: a bad flag, a missing file).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

struct AttemptOutcome {
  int exit_code = 0;
  JobEnd end;                             // how it ended (meaningful when exit_code != 0)
  std::chrono::milliseconds ran_for{0};  // start of the attempt to its end
};

class RestartPolicy {
 public:
  explicit RestartPolicy(int max_restarts,
                         std::chrono::milliseconds quick_failure = std::chrono::seconds(10));

  struct Decision {
    bool restart = false;
    std::string message;  // one line for the user ("" when the job simply succeeded)
  };
  // Records the attempt that just ended and decides whether to start another.
  Decision after_attempt(const AttemptOutcome& outcome);

  int restarts_done() const { return restarts_; }
  // "restart 1 after: rank 1 ... was killed by SIGKILL" lines, one per restart, for the summary.
  std::vector<std::string> restart_log() const { return log_; }

 private:
  int max_restarts_;
  std::chrono::milliseconds quick_failure_;
  int restarts_ = 0;
  std::vector<AttemptOutcome> attempts_;
  std::vector<std::string> log_;
};

// A short cause for logs: the end's message, or its kind and rank when there is none.
std::string describe_cause(const JobEnd& end);

}  // namespace hvrun::launcher

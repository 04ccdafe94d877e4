// The placement of a job whose ranks all run on this host (placement_choice.h decides that):
// hvrun forks each rank itself, under a JobRunner (supervisor/job_runner.h), or under an
// ElasticRunner (elastic/elastic_runner.h) when a lost rank should end only the membership.
// Ranks reach the coordinator over a unix socket (or loopback TCP with --coordinator-port).
#pragma once

#include <memory>
#include <string>

#include "launcher/attempt/placement.h"
#include "launcher/plan/rank_environment.h"

namespace hvrun::launcher {

class ElasticRunner;
class JobRunner;

class LocalProcesses final : public Placement {
 public:
  // `command_path`: the user's command, resolved in PATH.
  explicit LocalProcesses(std::string command_path);
  ~LocalProcesses() override;

  bool ranks_are_local() const override { return true; }
  PeerAccessProbe peer_access_probe() const override;
  int run(Attempt& attempt) override;

 private:
  std::string command_path_;
  JobIdentity identity_;  // once the coordinator's address is known
  std::unique_ptr<JobRunner> plain_;
  std::unique_ptr<ElasticRunner> elastic_;
};

}  // namespace hvrun::launcher

// The placement of an `hvrun --mpi` job (mpi_handoff.h): hvrun's one child on this host is
// mpirun, which starts the ranks where its host list says and tags their output itself. The ranks
// take the job's identity from mpirun's exported environment; the coordinator learns of their
// ends from their streams (mpirun's exit is not any rank's).
#pragma once

#include <memory>

#include "launcher/attempt/placement.h"
#include "launcher/mpi/mpi_handoff.h"

namespace hvrun::launcher {

class JobRunner;

class MpirunProcesses final : public Placement {
 public:
  explicit MpirunProcesses(MpiHandoff handoff);
  ~MpirunProcesses() override;

  bool ranks_are_local() const override { return false; }  // mpirun's may run on other hosts
  int run(Attempt& attempt) override;

 private:
  MpiHandoff handoff_;
  std::unique_ptr<JobRunner> runner_;
};

}  // namespace hvrun::launcher

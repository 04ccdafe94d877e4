// Which CPU data plane a job's ranks use, and making it. Every rank decides from the same inputs
// (the settings, which hvrun passes to all ranks alike, and the coordinator's list of every
// rank's host), so all ranks pick the same backend without talking.
//
//   --cpu-backend gloo                      Gloo over TCP for everything.
//   --cpu-backend auto (default) or shm:
//     one host, more than one rank          shared memory (backends/shm).
//     several hosts, hierarchical on        shm within each host + Gloo among one rank per host
//                                           (backends/shm/hierarchical_backend.h).
//     several hosts, hierarchical off       Gloo (auto), or an error (shm asked for explicitly).
//   --hierarchical-allreduce auto (default) = on when some host runs more than one rank.
//   A job of one rank uses Gloo (it moves no bytes).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"
#include "hvrun/hvrun.h"
#include "worker_lib/round_agreement.h"
#include "worker_lib/backend.h"
#include "worker_lib/kv_store.h"
#include "worker_lib/runtime/registration.h"

namespace hvrun::detail {

enum class CpuBackendKind { kGloo, kShm, kHierarchical };
const char* cpu_backend_kind_name(CpuBackendKind kind);

struct CpuBackendContext {
  int rank = 0;
  std::vector<std::string> hosts;  // host of every rank, by rank (the coordinator's view)
  std::string job_id;              // names the shared-memory segments
  std::string data_address = "127.0.0.1";
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds op_timeout{300000};
  // Whether the plane comes with its round agreement (the job's global set; a process set's
  // plane runs only planned collectives), and how long a rank waits for the others in a round
  // (agreement/fast_path.h's round_wait): on several hosts, the cross-host rounds' arbiter's wait.
  bool round_agreement = true;
  std::chrono::nanoseconds round_wait{std::chrono::milliseconds(50)};
};

// Pure: the same answer on every rank for the same settings and hosts.
Result<CpuBackendKind> choose_cpu_backend(const CpuBackendConfig& settings,
                                          const std::vector<std::string>& hosts);

// The connected backend, and the round agreement its ranks can agree through without the
// coordinator: the shm segment's board on a single host, the cross-host rounds
// (agreement/host_rounds/host_rounds.h) on several hosts (hierarchical, or Gloo with every rank
// speaking for itself), null otherwise (Gloo on one host, a process set's plane). The agreement
// lives as long as the backend.
struct CpuDataPlane {
  std::unique_ptr<Backend> backend;
  RoundAgreement* rounds = nullptr;
};

// Connects the chosen backend (blocks until the peers did, bounded by connect_timeout).
Result<CpuDataPlane> make_cpu_backend(const CpuBackendContext& context,
                                      const CpuBackendConfig& settings, KeyValueStore& store);

// What the runtime calls after registration: settings from `config.cpu_backend`, hosts from the
// coordinator's answer.
Result<CpuDataPlane> make_cpu_backend_for_job(const Config& config,
                                              const Registration& registered,
                                              KeyValueStore& store);

}  // namespace hvrun::detail

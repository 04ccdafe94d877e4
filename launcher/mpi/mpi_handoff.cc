#include "launcher/mpi/mpi_handoff.h"

#include <cstdlib>
#include <set>

#include "common/ipv4_interfaces.h"
#include "common/setting_keys.h"
#include "launcher/mpi/mpirun_command.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/process/worker_process.h"

namespace hvrun::launcher {

Result<MpiHandoff> plan_mpi_handoff(const LaunchOptions& options, const JobPlan& plan,
                                    const Environment& launch) {
  const Settings& settings = options.settings;
  MpiHandoff handoff;
  auto mpirun = resolve_command("mpirun", std::getenv("PATH"));
  if (!mpirun.is_ok())
    return failed_precondition("--mpi: mpirun is not in PATH (install Open MPI: openmpi-bin), or "
                               "drop --mpi to let hvrun start the ranks itself");
  handoff.mpirun_path = *mpirun;

  MpirunJob job;
  job.mpirun = handoff.mpirun_path;
  job.size = plan.size;
  job.hosts = plan.multi_host ? plan.hosts
                              : std::vector<HostSlots>{HostSlots{"localhost", plan.size}};
  job.tag_output = settings.get(setting::kTagOutput);
  HVRUN_ASSIGN_OR_RETURN(job.mpi_args, split_shell_words(settings.get(setting::kMpiArgs)));
  job.command = options.command;

  if (plan.multi_host) {
    const std::string names = settings.get(setting::kNetworkInterface);
    if (names.empty())
      return invalid_argument(
          "--mpi across hosts needs --network-interface NAME[,NAME] (the interface the hosts "
          "reach each other on): without hvrun's agents there is nothing to probe");
    HVRUN_ASSIGN_OR_RETURN(std::string address,
                           address_of_named_interface("--network-interface", names,
                                                      list_ipv4_interfaces()));
    handoff.listen_on = address + ":" + std::to_string(settings.get(setting::kCoordinatorPort));
    for (const char* variable : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"})
      if (launch.count(variable) == 0) handoff.network[variable] = names;
  }

  // Every variable hvrun's own workers would get from the launch host, by name.
  std::set<std::string> names;
  for (const char* name : kMpiIdentityVariables) names.insert(name);
  for (const auto& [name, value] : settings.non_default_environment()) names.insert(name);
  for (const auto& [name, value] : forwarded_environment(launch, options.exports, nullptr))
    names.insert(name);
  for (const auto& [name, value] : handoff.network) names.insert(name);
  job.exported.assign(names.begin(), names.end());
  handoff.argv = mpirun_command(job);
  return handoff;
}

}  // namespace hvrun::launcher

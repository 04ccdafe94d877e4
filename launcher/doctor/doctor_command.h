// `hvrun doctor [--json] [--p2p-test] [-H hosts]`: checks this machine (or each of `hosts`)
// before a GPU job and prints a report with verdicts. Exit 0 (fine), 1 (warnings), 2 (errors or bad arguments).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "launcher/doctor/machine.h"
#include "launcher/doctor/probe.h"
#include "launcher/doctor/report.h"

namespace hvrun::doctor {

struct DoctorOptions {
  bool json = false;
  bool p2p_test = false;
  bool help = false;
  bool frameworks = false;       // --frameworks: ask Python for PyTorch / TensorFlow
  std::string python = "python3";  // --python PATH
  std::string hosts;  // -H / --hosts
  // With -H: ssh options handed to the multi-host launch (-p, -i, --rsh, --start-timeout), as
  // hvrun takes them (or from HVRUN_SSH_PORT, HVRUN_SSH_IDENTITY_FILE, HVRUN_RSH).
  std::vector<std::string> launcher_flags;
  double p2p_timeout_seconds = 60;
};

struct DoctorDeps {
  MachineProbe* probe = nullptr;
  BuildFacts build;
  // Runs the timed allreduce with P2P on and off; absent = "cannot run" with the reason below.
  std::function<P2pTestResult(const MachineDescription&, const DoctorOptions&)> p2p_test;
  // Fills machine.frameworks for --frameworks (the real one runs Python).
  std::function<void(MachineDescription&, const DoctorOptions&)> frameworks;
  // Runs the doctor on other hosts (-H); absent = "not available".
  std::function<int(const DoctorOptions&, std::ostream&, std::ostream&)> on_hosts;
};

std::string doctor_usage();

int run_doctor(const std::vector<std::string>& args, DoctorDeps& deps, std::ostream& out,
               std::ostream& err);

// The real command: this host's probe, this build, the NCCL-based P2P test.
int run_doctor_main(const std::vector<std::string>& args);

}  // namespace hvrun::doctor

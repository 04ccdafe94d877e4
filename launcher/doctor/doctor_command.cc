#include "launcher/doctor/doctor_command.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "common/status.h"
#include "launcher/doctor/framework_probe.h"
#include "launcher/doctor/hosts_doctor.h"
#include "launcher/doctor/p2p_test.h"
#include "launcher/doctor/verdicts.h"

namespace hvrun::doctor {

std::string doctor_usage() {
  return "usage: hvrun doctor [--json] [--p2p-test [--p2p-timeout S]] [--frameworks [--python P]]\n"
         "                    [-H host[,host...]]\n"
         "Checks this machine for a GPU job: NVIDIA driver and its CUDA level, CUDA runtime and\n"
         "NCCL (built with / found), every GPU, P2P and topology matrices, PCIe ACS/IOMMU,\n"
         "network interfaces and the ones NCCL would pick, NCCL settings (environment and\n"
         "config files), then verdicts with reasons and fixes.\n"
         "  --json          one JSON object instead of the report\n"
         "  --p2p-test      time an allreduce across this host's GPUs with P2P on and with\n"
         "                  NCCL_P2P_DISABLE=1 (needs 2+ GPUs, the driver and libnccl.so.2)\n"
         "  --p2p-timeout S seconds each run may take before it counts as hung (default 60)\n"
         "  --frameworks    also ask Python (python3, or --python P) which PyTorch/TensorFlow it\n"
         "                  imports and the CUDA/cuDNN/NCCL they were built with; the driver\n"
         "                  must serve each framework's CUDA too (takes seconds: imports)\n"
         "  -H HOSTS        run the doctor on each host (through ssh and `hvrun agent`, as a\n"
         "                  multi-host job does) and add a one-line-per-host summary; takes\n"
         "                  hvrun's -p/--ssh-port, -i/--ssh-identity-file, --rsh, --start-timeout\n"
         "Exit status: 0 fine, 1 warnings, 2 errors.\n";
}

namespace {

Result<DoctorOptions> parse(const std::vector<std::string>& args) {
  DoctorOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") o.json = true;
    else if (a == "--p2p-test") o.p2p_test = true;
    else if (a == "--help" || a == "-h") o.help = true;
    else if (a == "--frameworks") o.frameworks = true;
    else if (a == "--python") {
      if (i + 1 >= args.size()) return Status(StatusCode::kInvalidArgument, "--python needs a path");
      o.python = args[++i];
      o.frameworks = true;
    }
    else if (a == "-H" || a == "--hosts" || a.rfind("--hosts=", 0) == 0) {
      if (a.rfind("--hosts=", 0) == 0) o.hosts = a.substr(8);
      else if (i + 1 < args.size()) o.hosts = args[++i];
      else return Status(StatusCode::kInvalidArgument, a + " needs a value (host[,host...])");
    } else if (a == "-p" || a == "--ssh-port" || a == "-i" || a == "--ssh-identity-file" ||
               a == "--rsh" || a == "--start-timeout") {
      if (i + 1 >= args.size())
        return Status(StatusCode::kInvalidArgument, a + " needs a value");
      o.launcher_flags.push_back(a);
      o.launcher_flags.push_back(args[++i]);
    } else if (a == "--p2p-timeout" || a.rfind("--p2p-timeout=", 0) == 0) {
      std::string v = a.size() > 13 ? a.substr(14) : (i + 1 < args.size() ? args[++i] : "");
      char* end = nullptr;
      o.p2p_timeout_seconds = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || o.p2p_timeout_seconds <= 0)
        return Status(StatusCode::kInvalidArgument,
                      "--p2p-timeout '" + v + "': expected seconds > 0");
    } else {
      return Status(StatusCode::kInvalidArgument,
                    "doctor: unknown option '" + a + "' (see hvrun doctor --help)");
    }
  }
  return o;
}

}  // namespace

int run_doctor(const std::vector<std::string>& args, DoctorDeps& deps, std::ostream& out,
               std::ostream& err) {
  auto parsed = parse(args);
  if (!parsed.is_ok()) {
    err << "hvrun: " << parsed.status().message() << "\n";
    return 2;
  }
  const DoctorOptions& opts = *parsed;
  if (opts.help) {
    out << doctor_usage();
    return 0;
  }
  if (!opts.hosts.empty()) {
    if (deps.on_hosts) return deps.on_hosts(opts, out, err);
    err << "hvrun: doctor -H " << opts.hosts
        << ": checking other hosts is not available in this hvrun; run `hvrun doctor` on each "
           "host, e.g. ssh HOST hvrun doctor --json\n";
    return 2;
  }
  MachineDescription machine = deps.probe->describe();
  if (opts.frameworks && deps.frameworks) deps.frameworks(machine, opts);
  std::vector<Verdict> verdicts = diagnose(machine, deps.build);
  P2pTestResult p2p;
  if (opts.p2p_test) {
    if (deps.p2p_test) {
      p2p = deps.p2p_test(machine, opts);
    } else {
      p2p.why_not = "this hvrun has no P2P test";
    }
    for (Verdict& v : p2p_verdicts(p2p)) verdicts.push_back(std::move(v));
    std::stable_sort(verdicts.begin(), verdicts.end(), [](const Verdict& a, const Verdict& b) {
      return static_cast<int>(a.severity) > static_cast<int>(b.severity);
    });
  }
  const P2pTestResult* shown = opts.p2p_test ? &p2p : nullptr;
  out << (opts.json ? render_json(machine, deps.build, verdicts, shown)
                    : render_text(machine, deps.build, verdicts, shown));
  return exit_code(verdicts);
}

int run_doctor_main(const std::vector<std::string>& args) {
  // The P2P test's child process (p2p_test.h), started by this command itself.
  if (!args.empty() && args[0] == "--p2p-child") return run_p2p_child(args);
  auto probe = host_probe([](const char* name) { return std::getenv(name); });
  DoctorDeps deps;
  deps.probe = probe.get();
  deps.build = this_build();
  deps.p2p_test = [](const MachineDescription& m, const DoctorOptions& o) {
    return run_p2p_test(m, o.p2p_timeout_seconds);
  };
  deps.on_hosts = run_doctor_on_hosts;
  deps.frameworks = [](MachineDescription& m, const DoctorOptions& o) {
    probe_frameworks(m, o.python, 120);
  };
  return run_doctor(args, deps, std::cout, std::cerr);
}

}  // namespace hvrun::doctor

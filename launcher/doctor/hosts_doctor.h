// `hvrun doctor -H host1,host2,...`: the doctor on every host, through hvrun's own multi-host
// launch (ssh + `hvrun agent` on remote hosts, the local launcher for this one). It runs
//   hvrun -H h1:1,h2:1 -np N --device cpu --output-filename DIR  /bin/sh -c "<hvrun> doctor ..."
// and reads each rank's report from DIR/rank.R/stdout (rank R runs on the R-th host). The
// remote shell exits 0 whatever the doctor found, so one host's warnings do not end the others'
// runs; each report's own exit status travels on its last line.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/doctor/doctor_command.h"
#include "launcher/doctor/verdicts.h"

namespace hvrun::doctor {

// "a,b:2,c" -> {"a","b","c"} (slots dropped, duplicates removed, order kept).
Result<std::vector<std::string>> doctor_hosts(const std::string& text);

struct HostReport {
  std::string host;
  int exit_code = -1;   // the doctor's own exit status on that host; -1: no report came back
  std::string report;   // text or JSON as that host's doctor printed it
};

// Splits a rank's captured stdout into the report and the exit-status line.
HostReport parse_host_output(const std::string& host, const std::string& stdout_text);

// One line per host: exit status, driver, NCCL found, interfaces NCCL would use (text reports).
std::string host_summary(const std::vector<HostReport>& reports);

// The NCCL / CUDA runtime version a host's report names ("" unknown), text or JSON report.
std::string reported_library_version(const HostReport& report, const std::string& library);

// Checks across hosts: NCCL found at run time must be the same version everywhere (ranks with
// different NCCL versions fail or hang in ncclCommInitRank), a differing CUDA runtime is a warning.
std::vector<Verdict> cross_host_verdicts(const std::vector<HostReport>& reports);

int run_doctor_on_hosts(const DoctorOptions& options, std::ostream& out, std::ostream& err);

}  // namespace hvrun::doctor

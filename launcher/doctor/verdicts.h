// The doctor's judgements: pure functions of a MachineDescription and the build, each with the
// reason and what to do. Sources for every rule: docs/gpu-facts.md (driver floors, P2P
// failure modes, NCCL's interface rules, compute capabilities); docs/doctor.md.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor {

enum class Severity { kInfo = 0, kWarning = 1, kError = 2 };
std::string_view to_string(Severity s);

struct Verdict {
  Severity severity = Severity::kInfo;
  std::string id;      // stable, for scripts and tests: "driver-below-floor", ...
  std::string title;   // one line
  std::string reason;  // why, with the numbers
  std::string fix;     // what to do ("" when nothing)
};

std::vector<Verdict> diagnose(const MachineDescription& machine, const BuildFacts& build);

// 0: nothing worse than info; 1: warnings; 2: errors.
int exit_code(const std::vector<Verdict>& verdicts);

// "580.65.06" -> {580, 65, 6}; empty when unparsable.
std::vector<int> parse_version(const std::string& text);
// a < b, component-wise (missing components are 0).
bool version_less(const std::vector<int>& a, const std::vector<int>& b);

// Driver floors from the CUDA release notes: minor-version compatibility per CUDA major
// ("" when unknown) and the full-feature driver of an exact CUDA major.minor ("" when not listed).
std::string minor_compat_driver_floor(int cuda_major);
std::string full_feature_driver(int cuda_major, int cuda_minor);

// GeForce and TITAN boards: an NCCL maintainer: "GeForce cards do not support P2P".
bool is_geforce(const std::string& gpu_name);

}  // namespace hvrun::doctor

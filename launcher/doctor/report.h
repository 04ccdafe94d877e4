// The doctor's report: readable text, or one JSON object (--json) with the same content.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/machine.h"
#include "launcher/doctor/verdicts.h"

namespace hvrun::doctor {

// Optional result of --p2p-test, shown with the report.
struct P2pTestResult {
  bool ran = false;
  std::string why_not;   // when !ran
  std::vector<std::string> lines;  // one per measurement, readable
  double busbw_p2p_gbs = -1;
  double busbw_no_p2p_gbs = -1;
  std::string error_p2p, error_no_p2p;
};

std::string render_text(const MachineDescription& m, const BuildFacts& b,
                        const std::vector<Verdict>& verdicts, const P2pTestResult* p2p);

std::string render_json(const MachineDescription& m, const BuildFacts& b,
                        const std::vector<Verdict>& verdicts, const P2pTestResult* p2p);

// nvidia-smi topo -m style names of NVML's common-ancestor levels: 0 "INT", 10 "PIX", 20 "PXB",
// 30 "PHB", 40 "NODE", 50 "SYS"; "?" unknown.
std::string topology_name(int level);

}  // namespace hvrun::doctor

// `hvrun doctor --frameworks`: asks a Python interpreter which PyTorch / TensorFlow it imports and
// the CUDA, cuDNN and NCCL they were built with (import torch / tensorflow take seconds, hence
// opt-in). Each framework's CUDA then goes through the same driver-floor verdicts.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor {

// Parses the probe script's lines "framework NAME VERSION cuda=X cudnn=Y nccl=Z".
std::vector<FrameworkInfo> parse_framework_lines(const std::string& output);

// Runs `python -c <probe>` (bounded) and fills m.frameworks and m.frameworks_note.
void probe_frameworks(MachineDescription& m, const std::string& python, double timeout_seconds);

}  // namespace hvrun::doctor

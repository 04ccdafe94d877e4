// The checks a host runs on itself before ranks start there (`hvrun health-check`, run by hvrun
// on each host: host_health.h). Each returns the reason the host is unfit, or empty when it is
// fit; what is worth saying of a fit host (no GPU here) goes to `notes`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/nvidia/nvml_api.h"
#include "launcher/health/health_options.h"

namespace hvrun::launcher {

struct HealthVerdict {
  bool healthy = true;
  std::string reason;              // why not, in one line
  std::vector<std::string> notes;  // of a healthy host: what was not checked, and why
};

// Free space under `path` (the nearest directory of it that exists: the trainer may create the
// rest) is at least `min_free_mb` MiB.
std::string check_free_disk(const std::string& path, int64_t min_free_mb);

// The first of `names` that this host has is up and has a carrier (IFF_UP and IFF_RUNNING).
std::string check_link(const std::vector<std::string>& names);

// GPUs 0..pinned-1 (those the host's local ranks pin) answer NVML, report no uncorrected ECC
// error since the driver loaded and no page retirement waiting for a reset. NVML is opened from
// `library` at run time; a host without it (or without GPUs) passes with a note.
std::string check_gpus(int pinned, std::vector<std::string>& notes,
                       const std::string& library = nvidia::kNvmlLibrary);

// Runs `script` through /bin/sh -c, killed (its process group) when `timeout` passes. Exit 0:
// empty; otherwise its first line of output (stdout and stderr) and how it ended.
std::string run_health_script(const std::string& script, std::chrono::milliseconds timeout);

// "30", "0.5": a timeout as the user wrote it, in seconds.
std::string seconds_text(std::chrono::milliseconds ms);

// Every check `request` asks for, in order: disk, link, GPUs, the script (the first failing one
// decides).
HealthVerdict check_this_host(const HostCheckRequest& request);

}  // namespace hvrun::launcher

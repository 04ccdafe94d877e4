#include "launcher/health/health_checks.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/nvidia/dynamic_library.h"
#include "launcher/doctor/child_process.h"
#include "launcher/process/own_children.h"

namespace hvrun::launcher {

namespace {

std::string first_line(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) {
      line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
      constexpr size_t kMost = 300;  // one line of reason, not a log
      return line.size() > kMost ? line.substr(0, kMost) + "..." : line;
    }
    start = end + 1;
  }
  return "";
}

std::string nvml_error(const nvidia::NvmlApi& nvml, int rc) {
  const char* text = nvml.error_string ? nvml.error_string(rc) : nullptr;
  return "NVML error " + std::to_string(rc) + (text ? std::string(" (") + text + ")" : "");
}

}  // namespace

std::string seconds_text(std::chrono::milliseconds ms) {
  const long long tenths = (ms.count() + 50) / 100;
  return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "");
}

std::string check_free_disk(const std::string& path, int64_t min_free_mb) {
  if (min_free_mb <= 0) return "";
  std::filesystem::path dir = path;
  std::error_code ec;
  while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir != dir.parent_path())
    dir = dir.parent_path();
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0)
    return "cannot read the free space of " + dir.string() + ": " + std::strerror(errno);
  const uint64_t free_mb =
      static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize) / (1024 * 1024);
  if (free_mb >= static_cast<uint64_t>(min_free_mb)) return "";
  return "only " + std::to_string(free_mb) + " MiB free on " + dir.string() + ", below " +
         std::to_string(min_free_mb) +
         " MiB (--health-min-free-disk); free space there or point --health-disk-path elsewhere";
}

std::string check_link(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return std::string("cannot open a socket to read interface flags: ") + std::strerror(errno);
  std::string listed;
  for (const std::string& name : names) {
    listed += (listed.empty() ? "" : ",") + name;
    ifreq request{};
    if (name.size() >= sizeof request.ifr_name) continue;
    std::memcpy(request.ifr_name, name.c_str(), name.size());
    if (::ioctl(fd, SIOCGIFFLAGS, &request) != 0) continue;  // not on this host: the next
    ::close(fd);
    const auto flags = static_cast<unsigned>(request.ifr_flags);
    if (!(flags & IFF_UP)) return "data interface " + name + " is down (administratively)";
    if (!(flags & IFF_RUNNING)) return "data interface " + name + " has no link (no carrier)";
    return "";
  }
  ::close(fd);
  return "none of the data interfaces named by --network-interface (" + listed +
         ") is on this host";
}

std::string check_gpus(int pinned, std::vector<std::string>& notes, const std::string& library) {
  if (pinned <= 0) return "";
  nvidia::DynamicLibrary lib(library);
  if (!lib) {
    notes.push_back("no GPU (" + library + " cannot be loaded): GPUs not checked");
    return "";
  }
  const nvidia::NvmlApi nvml = nvidia::NvmlApi::resolve(lib.handle());
  if (!nvml.init || !nvml.count || !nvml.by_index)
    return library + " lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2";
  if (const int rc = nvml.init(); rc != nvidia::kNvmlSuccess)
    return "NVML did not start (" + nvml_error(nvml, rc) + "): the GPU driver is not answering";
  unsigned count = 0;
  std::string problem;
  if (const int rc = nvml.count(&count); rc != nvidia::kNvmlSuccess)
    problem = "NVML cannot count the GPUs (" + nvml_error(nvml, rc) + ")";
  if (problem.empty() && count == 0) notes.push_back("no GPU (NVML lists none): GPUs not checked");
  // A local rank beyond the GPUs pins none (a CPU rank): only those that exist are checked.
  const unsigned checked = std::min(count, static_cast<unsigned>(pinned));
  for (unsigned i = 0; problem.empty() && i < checked; ++i) {
    nvidia::NvmlDevice device = nullptr;
    char uuid[96] = {0};
    int rc = nvml.by_index(i, &device);
    if (rc == nvidia::kNvmlSuccess && nvml.uuid) rc = nvml.uuid(device, uuid, sizeof uuid);
    if (rc != nvidia::kNvmlSuccess) {
      problem = "GPU " + std::to_string(i) + " does not answer (" + nvml_error(nvml, rc) + ")";
      break;
    }
    const std::string which = "GPU " + std::to_string(i) + (uuid[0] ? std::string(" ") + uuid : "");
    unsigned long long uncorrected = 0;
    if (nvml.total_ecc_errors &&
        nvml.total_ecc_errors(device, nvidia::kNvmlMemoryErrorUncorrected, nvidia::kNvmlVolatileEcc,
                              &uncorrected) == nvidia::kNvmlSuccess &&
        uncorrected > 0) {
      problem = which + " reports " + std::to_string(uncorrected) +
                " uncorrected ECC error(s) since the driver loaded";
      break;
    }
    int pending = 0;
    if (nvml.retired_pages_pending &&
        nvml.retired_pages_pending(device, &pending) == nvidia::kNvmlSuccess &&
        pending == nvidia::kNvmlFeatureEnabled) {
      problem = which + " has retired memory pages waiting for a GPU reset";
      break;
    }
  }
  if (nvml.shutdown) nvml.shutdown();
  return problem;
}

std::string run_health_script(const std::string& script, std::chrono::milliseconds timeout) {
  const doctor::ChildResult r =
      doctor::run_child_process({"/bin/sh", "-c", script}, {},
                                static_cast<double>(timeout.count()) / 1000.0, record_own_child);
  if (r.timed_out)
    return "--health-check-script did not answer within " + seconds_text(timeout) +
           " s (--health-check-timeout)";
  if (r.exit_code == 0) return "";
  const std::string said = first_line(r.output);
  return (said.empty() ? std::string("--health-check-script said nothing") : said) +
         " (--health-check-script exited with code " + std::to_string(r.exit_code) + ")";
}

HealthVerdict check_this_host(const HostCheckRequest& request) {
  const HealthOptions& o = request.options;
  HealthVerdict verdict;
  std::string problem = check_free_disk(o.disk_path, o.min_free_disk_mb);
  if (problem.empty()) problem = check_link(o.interfaces);
  if (problem.empty() && o.pins_gpus) problem = check_gpus(request.slots, verdict.notes);
  if (problem.empty() && !o.script.empty()) problem = run_health_script(o.script, o.timeout);
  verdict.healthy = problem.empty();
  verdict.reason = problem;
  return verdict;
}

}  // namespace hvrun::launcher

#include "launcher/doctor/hosts_doctor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <sstream>

#include "launcher/doctor/child_process.h"
#include "launcher/doctor/json_writer.h"

namespace hvrun::doctor {
namespace {

constexpr const char* kExitMarker = "hvrun-doctor-exit=";

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The value after `prefix` on the first line of `text` that starts with it, trimmed.
std::string field(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::string v = line.substr(prefix.size());
    v.erase(0, v.find_first_not_of(' '));
    return v;
  }
  return "";
}

}  // namespace

Result<std::vector<std::string>> doctor_hosts(const std::string& text) {
  std::vector<std::string> hosts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::string host = item.substr(0, item.find(':'));
    if (host.empty())
      return Status(StatusCode::kInvalidArgument, "-H '" + text + "': an empty host name");
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  if (hosts.empty()) return Status(StatusCode::kInvalidArgument, "-H needs host[,host...]");
  return hosts;
}

HostReport parse_host_output(const std::string& host, const std::string& text) {
  HostReport r;
  r.host = host;
  size_t at = text.rfind(kExitMarker);
  if (at == std::string::npos) {
    r.report = text;
    return r;
  }
  r.report = text.substr(0, at);
  while (!r.report.empty() && r.report.back() == '\n') r.report.pop_back();
  r.report += "\n";
  r.exit_code = std::atoi(text.c_str() + at + std::char_traits<char>::length(kExitMarker));
  return r;
}

std::string host_summary(const std::vector<HostReport>& reports) {
  std::ostringstream out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-20s %-5s %-14s %-14s %s\n", "host", "exit", "NVIDIA driver",
                "NCCL", "NCCL would use");
  out << buf;
  for (const HostReport& r : reports) {
    std::string driver = field(r.report, "  NVIDIA driver");
    if (driver.rfind("none", 0) == 0) driver = "none";
    driver = driver.substr(0, driver.find(" ("));
    std::string nccl = field(r.report, "  NCCL            ");
    if (auto p = nccl.find("at run time "); p != std::string::npos) nccl = nccl.substr(p + 12);
    nccl = nccl.substr(0, nccl.find(" ("));
    std::string ifaces = field(r.report, "  NCCL would use:");
    ifaces = ifaces.substr(0, ifaces.find(" ("));
    std::snprintf(buf, sizeof buf, "  %-20s %-5s %-14s %-14s %s\n", r.host.c_str(),
                  r.exit_code < 0 ? "-" : std::to_string(r.exit_code).c_str(), driver.c_str(),
                  nccl.c_str(), ifaces.c_str());
    out << buf;
  }
  return out.str();
}

std::string reported_library_version(const HostReport& r, const std::string& library) {
  if (!r.report.empty() && r.report.front() == '{') {
    // {"...","nccl_runtime":{"found":true,"version":"2.28.9",...}
    const std::string key = "\"" + library + "_runtime\":{";
    size_t at = r.report.find(key);
    if (at == std::string::npos) return "";
    size_t end = r.report.find('}', at);
    size_t v = r.report.find("\"version\":\"", at);
    if (v == std::string::npos || v > end) return "";
    v += 11;
    return r.report.substr(v, r.report.find('"', v) - v);
  }
  std::string line = field(r.report, library == "nccl" ? "  NCCL            " : "  CUDA runtime    ");
  size_t at = line.find("at run time ");
  if (at == std::string::npos) return "";
  line = line.substr(at + 12);
  line = line.substr(0, line.find(" ("));
  return line.rfind("not found", 0) == 0 ? "" : line;
}

std::vector<Verdict> cross_host_verdicts(const std::vector<HostReport>& reports) {
  std::vector<Verdict> out;
  for (const char* library : {"nccl", "cuda"}) {
    std::map<std::string, std::vector<std::string>> hosts_by_version;
    for (const HostReport& r : reports) {
      if (r.exit_code < 0) continue;
      std::string v = reported_library_version(r, library);
      hosts_by_version[v.empty() ? "none" : v].push_back(r.host);
    }
    if (hosts_by_version.size() < 2) continue;
    std::string detail;
    for (const auto& [version, hosts] : hosts_by_version) {
      std::string names;
      for (const std::string& h : hosts) names += (names.empty() ? "" : ", ") + h;
      detail += (detail.empty() ? "" : "; ") + version + " on " + names;
    }
    const bool nccl = std::string(library) == "nccl";
    out.push_back({nccl ? Severity::kError : Severity::kWarning,
                   nccl ? "hosts-nccl-differ" : "hosts-cuda-differ",
                   std::string(nccl ? "NCCL" : "the CUDA runtime") + " differs across hosts", detail,
                   nccl ? "install the same NCCL version on every host (ranks with different "
                          "versions fail or hang while creating the communicator)"
                        : "use the same CUDA runtime (and framework build) on every host"});
  }
  return out;
}

int run_doctor_on_hosts(const DoctorOptions& options, std::ostream& out, std::ostream& err) {
  auto hosts = doctor_hosts(options.hosts);
  if (!hosts.is_ok()) {
    err << "hvrun: " << hosts.status().message() << "\n";
    return 2;
  }
  char dir_template[] = "/tmp/hvrun-doctor-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    err << "hvrun: doctor -H: cannot create a temporary directory under /tmp\n";
    return 2;
  }
  const std::string dir = dir_template;
  const std::string self = self_executable();
  std::string remote = shell_quote(self) + " doctor";
  if (options.json) remote += " --json";
  if (options.p2p_test) remote += " --p2p-test --p2p-timeout " + std::to_string(options.p2p_timeout_seconds);
  if (options.frameworks) remote += " --python " + shell_quote(options.python);
  remote += "; echo " + std::string(kExitMarker) + "$?";
  std::string host_list;
  for (const std::string& h : *hosts) host_list += (host_list.empty() ? "" : ",") + h + ":1";
  std::vector<std::string> argv = {self, "-H", host_list, "-np", std::to_string(hosts->size()),
                                   "--device", "cpu", "--output-filename", dir};
  argv.insert(argv.end(), options.launcher_flags.begin(), options.launcher_flags.end());
  for (const char* word : {"--", "/bin/sh", "-c"}) argv.push_back(word);
  argv.push_back(remote);
  // Each host's doctor needs seconds; the P2P test up to two timeouts; ssh its connect time.
  const double timeout = 120 + (options.p2p_test ? 2 * options.p2p_timeout_seconds : 0);
  ChildResult launch = run_child_process(argv, {}, timeout);

  std::vector<HostReport> reports;
  for (size_t rank = 0; rank < hosts->size(); ++rank) {
    std::ifstream in(dir + "/rank." + std::to_string(rank) + "/stdout");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    reports.push_back(parse_host_output((*hosts)[rank], text));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  int worst = 0;
  bool missing = false;
  for (const HostReport& r : reports) {
    if (r.exit_code < 0) missing = true;
    worst = std::max(worst, r.exit_code);
  }
  const bool none = std::all_of(reports.begin(), reports.end(),
                                [](const HostReport& r) { return r.exit_code < 0; });
  if (none) {
    err << "hvrun: doctor -H: no host reported" << (launch.timed_out ? " (timed out)" : "")
        << "; hvrun said:\n" << launch.output;
    return 2;
  }
  const std::vector<Verdict> across = cross_host_verdicts(reports);
  for (const Verdict& v : across) worst = std::max(worst, static_cast<int>(v.severity));
  if (options.json) {
    out << "{\"hosts\":[";
    for (size_t i = 0; i < reports.size(); ++i) {
      const HostReport& r = reports[i];
      out << (i ? "," : "") << "{\"host\":" << json::quote(r.host) << ",\"exit_code\":" << r.exit_code
          << ",\"report\":" << (r.exit_code < 0 || r.report.find('{') == std::string::npos ? "null" : r.report.substr(0, r.report.find_last_not_of("\n") + 1))
          << "}";
    }
    out << "],\"cross_host\":[";
    for (size_t i = 0; i < across.size(); ++i)
      out << (i ? "," : "") << "{\"severity\":\"" << to_string(across[i].severity)
          << "\",\"id\":\"" << across[i].id << "\",\"reason\":" << json::quote(across[i].reason) << "}";
    out << "],\"exit_code\":" << (missing ? 2 : worst) << "}\n";
  } else {
    for (const HostReport& r : reports) {
      out << "==== " << r.host << " ====\n";
      out << (r.exit_code < 0 ? "  no report came back from this host\n\n" : r.report + "\n");
    }
    out << "Hosts\n" << host_summary(reports);
    for (const Verdict& v : across)
      out << "  [" << to_string(v.severity) << "] " << v.title << "\n      why: " << v.reason
          << "\n      fix: " << v.fix << "\n";
  }
  if (missing || launch.timed_out) {
    err << "hvrun: doctor -H: "
        << (launch.timed_out ? "the multi-host run did not finish within " +
                                   std::to_string(static_cast<int>(timeout)) + " s; "
                             : std::string())
        << "not every host reported; hvrun said:\n" << launch.output;
    return 2;
  }
  return worst;
}

}  // namespace hvrun::doctor

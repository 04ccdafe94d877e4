#include "launcher/autopsy/dump_command.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "autopsy/report_files.h"
#include "launcher/autopsy/report_directory_card.h"

namespace hvrun::launcher {
namespace {

constexpr const char* kUsage =
    "usage: hvrun dump PID [--autopsy-dir DIR] [--wait-seconds S]\n"
    "  PID: the job's hvrun process; DIR: where to wait for its report (default: the directory\n"
    "  the job writes its reports in, as its hvrun published it)\n";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `pid` is an hvrun that runs a job (not an agent, not another program).
bool is_hvrun_job(pid_t pid, std::string* why) {
  std::string comm = read_text("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) comm.pop_back();
  if (comm.empty()) {
    *why = "no process " + std::to_string(pid);
    return false;
  }
  if (comm != "hvrun") {
    *why = "process " + std::to_string(pid) + " is '" + comm + "', not hvrun";
    return false;
  }
  const std::string cmdline = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  const size_t first_end = cmdline.find('\0');
  if (first_end != std::string::npos && cmdline.compare(first_end + 1, 6, "agent") == 0) {
    *why = "process " + std::to_string(pid) +
           " is an hvrun agent; give the launching hvrun's pid";
    return false;
  }
  return true;
}

}  // namespace

int run_dump_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  pid_t pid = 0;
  std::string dir;
  double wait_seconds = 30;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--autopsy-dir" || args[i] == "--wait-seconds") && i + 1 < args.size()) {
      if (args[i] == "--autopsy-dir") dir = args[i + 1];
      else wait_seconds = std::atof(args[i + 1].c_str());
      ++i;
    } else if (args[i] == "--help" || args[i] == "-h") {
      out << kUsage;
      return 0;
    } else if (pid == 0 && !args[i].empty() && args[i].find_first_not_of("0123456789") == std::string::npos) {
      pid = static_cast<pid_t>(std::atol(args[i].c_str()));
    } else {
      err << "hvrun dump: unexpected argument '" << args[i] << "'\n" << kUsage;
      return 2;
    }
  }
  if (pid <= 0 || wait_seconds <= 0) {
    err << kUsage;
    return 2;
  }
  std::string why;
  if (!is_hvrun_job(pid, &why)) {
    err << "hvrun dump: " << why << "\n";
    return 1;
  }
  if (dir.empty()) {
    if (std::optional<std::string> published = read_report_directory_card(pid)) {
      dir = *published;
    } else {
      dir = autopsy_directory("", "");
      err << "hvrun dump: hvrun (pid " << pid << ") did not publish where it writes its reports ("
          << report_directory_card_path(pid) << "; an hvrun older than this one?); waiting in "
          << dir << ": give its --autopsy-dir if it has one\n";
    }
  }
  const auto asked = std::filesystem::file_time_type::clock::now();
  if (::kill(pid, SIGUSR1) != 0) {
    err << "hvrun dump: cannot signal hvrun (pid " << pid << "): " << std::strerror(errno) << "\n";
    return 1;
  }
  err << "hvrun dump: asked hvrun (pid " << pid << ") for an autopsy; waiting for its report in "
      << dir << "\n";
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(wait_seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("hvrun-autopsy-", 0) != 0 || entry.path().extension() != ".txt") continue;
      if (entry.last_write_time(ec) < asked || ec) continue;
      // Written whole before its name is announced: wait for the JSON beside it too.
      std::filesystem::path json = entry.path();
      json.replace_extension(".json");
      if (!std::filesystem::exists(json)) continue;
      out << read_text(entry.path());
      err << "hvrun dump: " << entry.path().string() << " and " << json.string() << "\n";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  err << "hvrun dump: no report appeared in " << dir << " within " << wait_seconds
      << " s (see the job's own output: it may not be running a job, or writes elsewhere: "
         "--autopsy-dir)\n";
  return 1;
}

}  // namespace hvrun::launcher

#include "launcher/process/proc_table.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace hvrun::launcher {
namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return std::nullopt;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime ..."; comm may hold spaces
  // and ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return std::nullopt;
  ProcStat s;
  s.pid = pid;
  int ppid = 0, pgrp = 0;
  if (std::sscanf(close_paren + 1,
                  " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
                  "%llu",
                  &s.state, &ppid, &pgrp, &s.start_time) != 4)
    return std::nullopt;
  s.ppid = ppid;
  s.pgrp = pgrp;
  return s;
}

std::vector<ProcStat> list_processes() {
  std::vector<ProcStat> all;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return all;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    if (auto s = read_proc_stat(static_cast<pid_t>(std::atol(entry->d_name)))) all.push_back(*s);
  }
  ::closedir(proc);
  return all;
}

unsigned long long process_start_time(pid_t pid) {
  const auto s = read_proc_stat(pid);
  return s ? s->start_time : 0;
}

std::string process_command(pid_t pid, size_t limit) {
  std::string words = read_whole("/proc/" + std::to_string(pid) + "/cmdline");
  while (!words.empty() && words.back() == '\0') words.pop_back();
  for (char& c : words)
    if (c == '\0' || c == '\n') c = ' ';
  if (words.empty()) {
    std::string comm = read_whole("/proc/" + std::to_string(pid) + "/comm");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    return comm.empty() ? "" : "[" + comm + "]";
  }
  if (words.size() > limit) words = words.substr(0, limit) + "...";
  return words;
}

std::string process_environment_value(pid_t pid, const std::string& name) {
  const std::string environ = read_whole("/proc/" + std::to_string(pid) + "/environ");
  const std::string prefix = name + "=";
  for (size_t at = 0; at < environ.size();) {
    size_t end = environ.find('\0', at);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(at, prefix.size(), prefix) == 0)
      return environ.substr(at + prefix.size(), end - at - prefix.size());
    at = end + 1;
  }
  return "";
}

}  // namespace hvrun::launcher

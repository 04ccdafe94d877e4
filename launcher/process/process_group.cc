#include "launcher/process/process_group.h"

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hvrun::launcher {
namespace {

// /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may contain spaces and ')'.
bool read_state_and_group(const char* pid_dir, char* state, long* pgrp) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid_dir);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return false;
  long ppid = 0;
  return std::sscanf(close_paren + 1, " %c %ld %ld", state, &ppid, pgrp) == 3;
}

}  // namespace

bool group_has_live_members(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return true;  // cannot tell: assume alive (the grace timer still bounds)
  bool alive = false;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    char state = 0;
    long pgrp = 0;
    if (!read_state_and_group(entry->d_name, &state, &pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      alive = true;
      break;
    }
  }
  ::closedir(proc);
  return alive;
}

bool signal_group(pid_t pgid, int sig) {
  const bool delivered = ::kill(-pgid, sig) == 0;
  if (delivered && sig != SIGKILL && sig != SIGCONT) ::kill(-pgid, SIGCONT);
  return delivered;
}

}  // namespace hvrun::launcher

// What /proc says of this host's processes: the fields of /proc/<pid>/stat the launcher acts on,
// and a process's command line. Used to find process groups' members (process_group.h) and what
// escaped them (stray_processes.h).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hvrun::launcher {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';                  // R, S, D, T, t, Z (zombie), X (dead), ...
  unsigned long long start_time = 0;  // clock ticks after boot: with the pid, who it is

  bool alive() const { return state != 'Z' && state != 'X'; }
};

// `pid`'s line of /proc (nullopt when it is gone or unreadable).
std::optional<ProcStat> read_proc_stat(pid_t pid);
// Every process /proc lists now.
std::vector<ProcStat> list_processes();
// `pid`'s start time, 0 when it is gone.
unsigned long long process_start_time(pid_t pid);
// `pid`'s command line, words joined by spaces, cut at `limit` characters ("..." added); its
// kernel name (comm) in brackets when the command line is empty; "" when it is gone.
std::string process_command(pid_t pid, size_t limit = 120);
// The value of variable `name` in `pid`'s environment as it started ("" when absent or
// unreadable).
std::string process_environment_value(pid_t pid, const std::string& name);

}  // namespace hvrun::launcher

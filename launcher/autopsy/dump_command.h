// `hvrun dump PID [--autopsy-dir DIR] [--wait-seconds S]`: an autopsy of a running job from
// another shell. Sends SIGUSR1 to the hvrun process PID (which asks every rank; the job goes on
// and prints its verdict on its own stderr), then waits for the report that job writes in its
// autopsy directory (the same default as the job's: give the job's --autopsy-dir if it had one)
// and prints it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hvrun::launcher {

int run_dump_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace hvrun::launcher

// The command line `hvrun --mpi` hands a job to: Open MPI's mpirun with the job's shape, the
// variables every rank needs exported by name (-x NAME: values travel in mpirun's environment,
// never in argv, so the secret does not show in `ps`), and the user's --mpi-args.
//
//   mpirun -np N -H host:slots,... --bind-to none --map-by slot [--tag-output]
//          -x NAME ... [--mpi-args words] COMMAND ARGS...
//
// Binding is left to hvrun's --bind-to semantics (none by default, as with horovodrun), and
// ranks fill hosts in order as hvrun's own launch does.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {

struct MpirunJob {
  std::string mpirun = "mpirun";
  int size = 0;
  std::vector<HostSlots> hosts;        // in order
  bool tag_output = true;              // mpirun --tag-output ([1,rank]<stdout>:)
  std::vector<std::string> exported;   // variable names, each as -x NAME
  std::vector<std::string> mpi_args;   // --mpi-args, already split
  std::vector<std::string> command;
};

std::vector<std::string> mpirun_command(const MpirunJob& job);

// Splits --mpi-args the way a POSIX shell splits words: blanks separate, single and double
// quotes group (double quotes honour backslash escapes), a backslash escapes the next character.
// An unterminated quote is an error naming the text.
Result<std::vector<std::string>> split_shell_words(const std::string& text);

}  // namespace hvrun::launcher

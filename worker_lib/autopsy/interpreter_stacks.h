// Calls the process's interpreter stack provider (hvrun/autopsy.h) with a deadline: on a thread
// of its own, so that a provider blocked on its interpreter's lock (a thread holding Python's
// GIL and never releasing it) cannot hold the autopsy up. While such a call is still blocked,
// later autopsies do not start another one and say why.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/autopsy.h"

namespace hvrun::detail {

struct InterpreterStacks {
  bool provided = false;  // a provider is registered (a Python trainer)
  std::vector<InterpreterThread> threads;
  std::string note;       // why `threads` is empty although provided
};

InterpreterStacks interpreter_stacks(std::chrono::milliseconds deadline);

}  // namespace hvrun::detail

// Autopsies (docs/autopsy.md): when the job looks stuck, hvrun asks every rank
// what it is doing; the worker library answers with its flight recorder, the collectives it
// waits in and every thread's native stack. A language runtime embedding the library adds its
// own stacks here: hvrun's Python package registers one at import, so a Python trainer's report
// shows each thread's Python frames without the trainer doing anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hvrun {

struct InterpreterFrame {
  std::string function;
  std::string file;
  int line = 0;
};

struct InterpreterThread {
  int64_t native_thread_id = 0;  // the kernel's thread id (Python's threading.get_native_id())
  std::string name;
  std::vector<InterpreterFrame> frames;  // innermost first
};

// Returns every interpreter thread's stack. Called on a thread of the library's own, never a
// signal handler; it may block (taking the GIL): the autopsy waits for it only until its
// deadline and reports the rank without these stacks after that.
using InterpreterStackProvider = std::function<std::vector<InterpreterThread>()>;

// Process-wide: the provider every autopsy of this process calls; an empty one removes it.
void set_interpreter_stack_provider(InterpreterStackProvider provider);

}  // namespace hvrun

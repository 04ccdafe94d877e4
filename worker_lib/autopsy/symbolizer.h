// Turns native stack addresses of this process into frames: function (demangled), source
// file:line where the object has debug info, and the object's path. elfutils' libdwfl does the
// work (it reads .symtab, so static functions of a program without -rdynamic get names, and
// DWARF line tables); libdw.so.1 is opened at run time, and without it only the dynamic symbol
// table is read (dladdr: exported names, no lines).
//
// Threads: any thread, outside signal handlers (it allocates and reads files).
#pragma once

#include <cstdint>
#include <vector>

#include "hvrun.pb.h"

namespace hvrun::detail {

// One view of the process's loaded objects, for several stacks (reading an object's tables
// once for all of them).
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `pcs` innermost first, as thread_stacks.h captures them: the first is the exact address
  // the thread was interrupted at, the others return addresses (looked up one byte earlier,
  // inside the call).
  std::vector<v1::AutopsyFrame> frames(const std::vector<uintptr_t>& pcs);

 private:
  void* dwfl_ = nullptr;  // libdwfl's Dwfl, or null (dladdr only)
};

}  // namespace hvrun::detail

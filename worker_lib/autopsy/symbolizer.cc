#include "worker_lib/autopsy/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

namespace hvrun::detail {
namespace {

std::string demangle(const char* name) {
  if (name == nullptr) return "";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> plain(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(name);
}

// Debug information inside the objects only (libdwfl reads an object's own DWARF before it
// asks): no search for separate debug files, which may mean debuginfod (a download inside the
// autopsy's deadline) when DEBUGINFOD_URLS is set.
int no_separate_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*,
                          GElf_Word, char**) {
  return -1;
}

// libdwfl's entry points, from libdw.so.1 opened at run time (the types from its header).
struct Libdwfl {
  decltype(&dwfl_begin) begin = nullptr;
  decltype(&dwfl_end) end = nullptr;
  decltype(&dwfl_linux_proc_report) proc_report = nullptr;
  decltype(&dwfl_report_end) report_end = nullptr;
  decltype(&dwfl_addrmodule) addrmodule = nullptr;
  decltype(&dwfl_module_addrname) addrname = nullptr;
  decltype(&dwfl_module_getsrc) getsrc = nullptr;
  decltype(&dwfl_lineinfo) lineinfo = nullptr;
  decltype(&dwfl_module_info) module_info = nullptr;
  decltype(&dwfl_linux_proc_find_elf) find_elf = nullptr;
  Dwfl_Callbacks callbacks{};
  bool loaded = false;
};

const Libdwfl& libdwfl() {
  static Libdwfl lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return;
    auto get = [handle](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      return fn != nullptr;
    };
    bool ok = get(lib.begin, "dwfl_begin") && get(lib.end, "dwfl_end") &&
              get(lib.proc_report, "dwfl_linux_proc_report") &&
              get(lib.report_end, "dwfl_report_end") && get(lib.addrmodule, "dwfl_addrmodule") &&
              get(lib.addrname, "dwfl_module_addrname") && get(lib.getsrc, "dwfl_module_getsrc") &&
              get(lib.lineinfo, "dwfl_lineinfo") && get(lib.module_info, "dwfl_module_info") &&
              get(lib.find_elf, "dwfl_linux_proc_find_elf");
    if (!ok) return;
    lib.callbacks.find_elf = lib.find_elf;
    lib.callbacks.find_debuginfo = no_separate_debuginfo;
    lib.loaded = true;
  });
  return lib;
}

// The object's name and, when `name_function`, the exported symbol; the offset from the
// object's load address always (an unnamed frame is then still found offline).
void fill_with_dladdr(uintptr_t lookup, uintptr_t pc, v1::AutopsyFrame& frame,
                      bool name_function) {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(lookup), &info) == 0) return;
  const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  if (base != 0 && pc >= base) frame.set_object_offset(pc - base);
  if (!name_function) return;
  if (info.dli_fname != nullptr) frame.set_object(info.dli_fname);
  if (info.dli_sname != nullptr) frame.set_function(demangle(info.dli_sname));
}

}  // namespace

Symbolizer::Symbolizer() {
  const Libdwfl& lib = libdwfl();
  if (!lib.loaded) return;
  Dwfl* dwfl = lib.begin(&lib.callbacks);
  if (dwfl != nullptr && (lib.proc_report(dwfl, ::getpid()) != 0 ||
                          lib.report_end(dwfl, nullptr, nullptr) != 0)) {
    lib.end(dwfl);
    dwfl = nullptr;
  }
  dwfl_ = dwfl;
}

Symbolizer::~Symbolizer() {
  if (dwfl_ != nullptr) libdwfl().end(static_cast<Dwfl*>(dwfl_));
}

std::vector<v1::AutopsyFrame> Symbolizer::frames(const std::vector<uintptr_t>& pcs) {
  std::vector<v1::AutopsyFrame> frames(pcs.size());
  const Libdwfl& lib = libdwfl();
  Dwfl* dwfl = static_cast<Dwfl*>(dwfl_);
  for (size_t i = 0; i < pcs.size(); ++i) {
    v1::AutopsyFrame& frame = frames[i];
    frame.set_address(pcs[i]);
    const uintptr_t lookup = i == 0 || pcs[i] == 0 ? pcs[i] : pcs[i] - 1;
    Dwfl_Module* module = dwfl != nullptr ? lib.addrmodule(dwfl, lookup) : nullptr;
    if (module == nullptr) {
      fill_with_dladdr(lookup, pcs[i], frame, true);
      continue;
    }
    const char* main_file = nullptr;
    const char* name = lib.module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr,
                                       &main_file, nullptr);
    frame.set_object(main_file != nullptr ? main_file : name != nullptr ? name : "");
    if (const char* symbol = lib.addrname(module, lookup)) frame.set_function(demangle(symbol));
    if (Dwfl_Line* line = lib.getsrc(module, lookup)) {
      int number = 0;
      if (const char* file = lib.lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr)) {
        frame.set_file(file);
        frame.set_line(number);
      }
    }
    fill_with_dladdr(lookup, pcs[i], frame, frame.function().empty());
  }
  return frames;
}

}  // namespace hvrun::detail

// A shared library opened at run time by soname or path (dlopen), and the typed look-up of its
// entry points. A library that cannot be loaded is an empty handle: for the NVIDIA libraries
// that means "no driver here", which callers report in their own words.
#pragma once

#include <string>

namespace hvrun::nvidia {

// Whether the library's symbols may resolve those of libraries loaded after it (kGlobal), or stay
// private to look-ups through its handle (kLocal).
enum class SymbolScope { kLocal, kGlobal };

// dlopen(name, RTLD_NOW | scope): the handle, or null when it cannot be loaded.
void* open_library(const std::string& name, SymbolScope scope = SymbolScope::kLocal);
// dlclose; null is fine.
void close_library(void* handle);
// dlsym; null when `handle` is null or lacks `name`.
void* find_symbol(void* handle, const char* name);

template <typename Fn>
Fn find_function(void* handle, const char* name) {
  return reinterpret_cast<Fn>(find_symbol(handle, name));
}

// Points `entry` at `name` in `handle` (null when missing).
template <typename Fn>
void bind_function(void* handle, const char* name, Fn& entry) {
  entry = find_function<Fn>(handle, name);
}

// Owns one open_library() handle.
class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  explicit DynamicLibrary(const std::string& name, SymbolScope scope = SymbolScope::kLocal)
      : handle_(open_library(name, scope)) {}
  ~DynamicLibrary() { close_library(handle_); }
  DynamicLibrary(DynamicLibrary&& other) noexcept : handle_(other.release()) {}
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  explicit operator bool() const { return handle_ != nullptr; }
  void* handle() const { return handle_; }
  // Keeps the library loaded for the rest of the process; returns its handle.
  void* release() {
    void* handle = handle_;
    handle_ = nullptr;
    return handle;
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace hvrun::nvidia

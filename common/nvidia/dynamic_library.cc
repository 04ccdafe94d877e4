#include "common/nvidia/dynamic_library.h"

#include <dlfcn.h>

namespace hvrun::nvidia {

void* open_library(const std::string& name, SymbolScope scope) {
  return dlopen(name.c_str(), RTLD_NOW | (scope == SymbolScope::kGlobal ? RTLD_GLOBAL : RTLD_LOCAL));
}

void close_library(void* handle) {
  if (handle != nullptr) dlclose(handle);
}

void* find_symbol(void* handle, const char* name) {
  return handle == nullptr ? nullptr : dlsym(handle, name);
}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    close_library(handle_);
    handle_ = other.release();
  }
  return *this;
}

}  // namespace hvrun::nvidia

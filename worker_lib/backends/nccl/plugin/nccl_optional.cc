#include "worker_lib/backends/nccl/plugin/nccl_optional.h"

#include <dlfcn.h>

namespace hvrun::detail::cuda {
namespace {

// The libnccl this plugin is linked to: found through one of its always-present functions, so
// the symbols come from that library and no other NCCL in the process.
void* loaded_nccl() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr)
    if (void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) return handle;
  return RTLD_DEFAULT;
}

template <typename Fn>
void resolve(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

const NcclOptional& NcclOptional::get() {
  static const NcclOptional resolved = [] {
    NcclOptional o;
    void* library = loaded_nccl();
    resolve(library, "ncclCommRegister", o.comm_register);
    resolve(library, "ncclCommDeregister", o.comm_deregister);
    resolve(library, "ncclCommRevoke", o.comm_revoke);
    resolve(library, "ncclCommShrink", o.comm_shrink);
    if (o.comm_register == nullptr || o.comm_deregister == nullptr) {
      o.comm_register = nullptr;  // both or neither
      o.comm_deregister = nullptr;
    }
    return o;
  }();
  return resolved;
}

std::string NcclOptional::describe() const {
  auto has = [](const void* fn) { return fn != nullptr ? "yes" : "no"; };
  return std::string("ncclCommRegister ") + has(reinterpret_cast<const void*>(comm_register)) +
         ", ncclCommRevoke " + has(reinterpret_cast<const void*>(comm_revoke)) +
         ", ncclCommShrink " + has(reinterpret_cast<const void*>(comm_shrink));
}

}  // namespace hvrun::detail::cuda

// The CUDA runtime and NCCL a job on this host would load, found the way the loader finds them
// (dlopen by soname), with their versions. Neither call needs a GPU.
#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <string>

#include "common/nccl_functions_used.h"
#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

std::string path_of(void* lib, void* symbol) {
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr)
    return info.dli_fname;
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    return map->l_name;
  return "";
}

// NCCL_VERSION_CODE: 2.8 and older encode X*1000+Y*100+Z, newer X*10000+Y*100+Z (nccl.h).
std::string nccl_version_text(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int rest = code >= 10000 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

// Well-known places a library may sit without being on the loader's path.
std::string hint(const char* file) {
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu"}) {
    std::error_code ec;
    std::string path = std::string(dir) + "/" + file;
    if (std::filesystem::exists(path, ec))
      return "present at " + path + " but not on the loader's path (LD_LIBRARY_PATH, ldconfig)";
  }
  return "";
}

void probe_nccl(MachineDescription& m) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    m.nccl_runtime.note = hint("libnccl.so.2");
    if (m.nccl_runtime.note.empty()) m.nccl_runtime.note = "libnccl.so.2 not on the loader's path";
    return;
  }
  auto get_version = reinterpret_cast<int (*)(int*)>(dlsym(lib, "ncclGetVersion"));
  m.nccl_runtime.found = true;
  m.nccl_runtime.path = path_of(lib, reinterpret_cast<void*>(get_version));
  int code = 0;
  if (get_version != nullptr && get_version(&code) == 0 && code > 0) {
    m.nccl_runtime.code = code;
    m.nccl_runtime.version = nccl_version_text(code);
  } else {
    m.nccl_runtime.note = "ncclGetVersion failed";
  }
  for (std::string_view function : kNcclFunctionsUsed)
    if (dlsym(lib, std::string(function).c_str()) == nullptr)
      m.nccl_runtime.missing.emplace_back(function);
  dlclose(lib);
}

void probe_cudart(MachineDescription& m) {
  for (const char* soname : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    auto get_version = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cudaRuntimeGetVersion"));
    m.cuda_runtime.found = true;
    m.cuda_runtime.path = path_of(lib, reinterpret_cast<void*>(get_version));
    int code = 0;
    if (get_version != nullptr && get_version(&code) == 0 && code > 0) {
      m.cuda_runtime.code = code;
      m.cuda_runtime.version = std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
    }
    dlclose(lib);
    return;
  }
  m.cuda_runtime.note = hint("libcudart.so");
  if (m.cuda_runtime.note.empty()) m.cuda_runtime.note = "no libcudart.so.{13,12,11.0} on the loader's path";
}

}  // namespace

void probe_libraries(MachineDescription& m) {
  probe_cudart(m);
  probe_nccl(m);
}

}  // namespace hvrun::doctor

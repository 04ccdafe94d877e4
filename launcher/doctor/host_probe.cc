#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "launcher/doctor/nccl_settings.h"
#include "launcher/doctor/probe.h"

extern char** environ;

namespace hvrun::doctor {
namespace {

class HostProbe : public MachineProbe {
 public:
  explicit HostProbe(std::function<const char*(const char*)> getenv) : getenv_(std::move(getenv)) {}

  MachineDescription describe() override {
    MachineDescription m;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) m.host = host;
    probe_nvidia_driver(m);
    probe_libraries(m);
    probe_network(m);
    probe_pcie(m);
    // Every NCCL_* variable, plus the few others that change what NCCL and hvrun do.
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string entry = *e;
      size_t eq = entry.find('=');
      if (eq == std::string::npos) continue;
      std::string name = entry.substr(0, eq);
      if (name.rfind("NCCL_", 0) == 0 && getenv_(name.c_str()) != nullptr)
        m.environment[name] = getenv_(name.c_str());
    }
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "HVRUN_NCCL_P2P", "CUDA_DEVICE_ORDER"})
      if (const char* v = getenv_(name); v != nullptr) m.environment[name] = v;
    // NCCL finds the home directory through getpwuid, not $HOME.
    const passwd* pw = getpwuid(getuid());
    std::string home = pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "";
    m.config_files = nccl_config_files(m.environment, home);
    for (NcclConfigFile& f : m.config_files) {
      std::ifstream in(f.path);
      if (!in) continue;
      f.exists = true;
      f.entries = parse_nccl_conf(std::string(std::istreambuf_iterator<char>(in), {}));
    }
    return m;
  }

 private:
  std::function<const char*(const char*)> getenv_;
};

}  // namespace

std::unique_ptr<MachineProbe> host_probe(std::function<const char*(const char*)> getenv) {
  return std::make_unique<HostProbe>(std::move(getenv));
}

}  // namespace hvrun::doctor

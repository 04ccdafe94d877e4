#include "launcher/doctor/framework_probe.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "launcher/doctor/child_process.h"

namespace hvrun::doctor {
namespace {

// Each import is tried on its own; a framework that fails to import is simply absent.
constexpr const char* kProbeScript = R"PY(
def show(name, version, cuda, cudnn, nccl):
    print("framework %s %s cuda=%s cudnn=%s nccl=%s" % (name, version, cuda or "", cudnn or "", nccl or ""))
try:
    import torch
    nccl = ""
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
    cudnn = ""
    try:
        cudnn = str(torch.backends.cudnn.version() or "")
    except Exception:
        pass
    show("PyTorch", torch.__version__, torch.version.cuda, cudnn, nccl)
except Exception:
    pass
try:
    import tensorflow as tf
    info = tf.sysconfig.get_build_info()
    show("TensorFlow", tf.__version__, info.get("cuda_version", ""), info.get("cudnn_version", ""), "")
except Exception:
    pass
)PY";

// `name` as execv wants it: a path, or the first match on $PATH.
std::string resolve(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::vector<FrameworkInfo> parse_framework_lines(const std::string& output) {
  std::vector<FrameworkInfo> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string tag;
    FrameworkInfo f;
    if (!(words >> tag >> f.name >> f.version) || tag != "framework") continue;
    std::string field;
    while (words >> field) {
      size_t eq = field.find('=');
      if (eq == std::string::npos) continue;
      std::string key = field.substr(0, eq), value = field.substr(eq + 1);
      if (value == "None") value.clear();
      if (key == "cuda") f.cuda = value;
      else if (key == "cudnn") f.cudnn = value;
      else if (key == "nccl") f.nccl = value;
    }
    out.push_back(f);
  }
  return out;
}

void probe_frameworks(MachineDescription& m, const std::string& python, double timeout_seconds) {
  const std::string exe = resolve(python);
  if (exe.empty()) {
    m.frameworks_note = python + " not found on PATH";
    return;
  }
  ChildResult r = run_child_process({exe, "-c", kProbeScript}, {}, timeout_seconds);
  if (r.timed_out) {
    m.frameworks_note = exe + " did not answer within " + std::to_string(static_cast<int>(timeout_seconds)) + " s";
    return;
  }
  if (r.exit_code != 0 && r.output.find("framework ") == std::string::npos) {
    m.frameworks_note = "could not run " + exe + " (exit " + std::to_string(r.exit_code) + ")";
    return;
  }
  m.frameworks = parse_framework_lines(r.output);
  m.frameworks_note = "asked " + exe + (m.frameworks.empty() ? ": neither PyTorch nor TensorFlow imports" : "");
}

}  // namespace hvrun::doctor

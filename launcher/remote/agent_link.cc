#include "launcher/remote/agent_link.h"

#include <unistd.h>

#include <cerrno>

#include "launcher/process/worker_process.h"

extern char** environ;

namespace hvrun::launcher {

bool apply_prestart_frame(AgentLink& link, const Frame& f) {
  if (f.type == "HELLO") {
    link.hello = true;
    link.version = f.payload;
  } else if (f.type == "IFACE") {
    std::vector<std::string> parts = split_list(f.payload);
    if (parts.size() < 4) return true;
    NetInterface iface;
    iface.name = parts[0];
    iface.address = parts[1];
    iface.probe_port = std::atoi(parts[2].c_str());
    apply_interface_flags(parts[3], iface);
    link.interfaces.push_back(iface);
  } else if (f.type == "IFACES_DONE") {
    link.interfaces_done = true;
  } else if (f.type == "PROBED") {
    if (f.args.size() < 2) return true;
    link.probes.push_back(ProbeOutcome{link.host, f.args[0], f.args[1] == "ok", f.payload});
  } else if (f.type == "PROBES_DONE") {
    link.probes_done = true;
  } else {
    return false;
  }
  return true;
}

bool AgentLink::send(const std::string& bytes) {
  if (in_fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(in_fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

Result<AgentLink> start_agent_link(const std::string& host, const std::vector<std::string>& argv,
                                   OrphanGuard* guard,
                                   bool (*leave_out)(const std::string& name)) {
  HVRUN_ASSIGN_OR_RETURN(std::string path, resolve_command(argv.at(0), std::getenv("PATH")));
  std::vector<std::string> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    if (leave_out != nullptr && leave_out(kv.substr(0, kv.find('=')))) continue;
    envp.push_back(kv);
  }
  HVRUN_ASSIGN_OR_RETURN(SpawnedWorker spawned, spawn_worker(path, argv, envp, true));
  if (guard != nullptr) guard->watch(spawned.pid);
  AgentLink link;
  link.host = host;
  link.program = argv.at(0);
  link.pid = spawned.pid;
  link.in_fd = spawned.stdin_fd;
  link.out_fd = spawned.stdout_fd;
  link.err_fd = spawned.stderr_fd;
  return link;
}

}  // namespace hvrun::launcher

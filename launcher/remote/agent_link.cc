#include "launcher/remote/agent_link.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "launcher/process/worker_process.h"

extern char** environ;

namespace hvrun::launcher {
namespace {

constexpr size_t kErrTextKept = 8192;

void handle_frame(AgentLink& link, const Frame& f) {
  if (f.type == "HELLO") {
    link.hello = true;
    link.version = f.payload;
  } else if (f.type == "IFACE") {
    std::vector<std::string> parts = split_list(f.payload);
    if (parts.size() < 4) return;
    NetInterface iface;
    iface.name = parts[0];
    iface.address = parts[1];
    iface.probe_port = std::atoi(parts[2].c_str());
    apply_interface_flags(parts[3], iface);
    link.interfaces.push_back(iface);
  } else if (f.type == "IFACES_DONE") {
    link.interfaces_done = true;
  } else if (f.type == "PROBED") {
    if (f.args.size() < 2) return;
    link.probes.push_back(ProbeOutcome{link.host, f.args[0], f.args[1] == "ok", f.payload});
  } else if (f.type == "PROBES_DONE") {
    link.probes_done = true;
  } else if (f.type == "NOTE") {
    link.notes.push_back(f.payload);
  }
}

void reap(AgentLink& link) {
  if (link.exited || link.pid <= 0) return;
  if (reap_if_exited(link.pid, &link.wait_status)) link.exited = true;
}

}  // namespace

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
                                   OrphanGuard* guard) {
  HVRUN_ASSIGN_OR_RETURN(std::string path, resolve_command(argv.at(0), std::getenv("PATH")));
  std::vector<std::string> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.emplace_back(*e);
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

void pump_until(std::vector<AgentLink>& links, std::chrono::steady_clock::time_point deadline,
                const std::function<bool(const AgentLink&)>& done,
                const std::function<std::string(const AgentLink&)>& describe_exit,
                const std::function<std::string(const AgentLink&)>& late) {
  constexpr auto kTick = std::chrono::milliseconds(50);  // SIGCHLD is not watched here: poll
  while (true) {
    bool waiting = false;
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> owner;  // (link, 1 stdout | 2 stderr)
    for (size_t i = 0; i < links.size(); ++i) {
      AgentLink& link = links[i];
      if (!link.failure.empty()) continue;
      if (done(link)) continue;
      reap(link);
      if (link.exited && link.out_closed) {
        link.failure = describe_exit(link);
        continue;
      }
      waiting = true;
      if (!link.out_closed) {
        fds.push_back(pollfd{link.out_fd, POLLIN, 0});
        owner.emplace_back(i, 1);
      }
      if (link.err_fd >= 0) {
        fds.push_back(pollfd{link.err_fd, POLLIN, 0});
        owner.emplace_back(i, 2);
      }
    }
    if (!waiting) return;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      for (AgentLink& link : links)
        if (link.failure.empty() && !done(link)) link.failure = late(link);
      return;
    }
    auto left = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                         std::chrono::duration_cast<std::chrono::milliseconds>(kTick));
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()) + 1);
    if (n < 0 && errno != EINTR) return;
    for (size_t k = 0; k < fds.size() && n > 0; ++k) {
      if (fds[k].revents == 0) continue;
      AgentLink& link = links[owner[k].first];
      char buffer[65536];
      ssize_t got = ::read(fds[k].fd, buffer, sizeof buffer);
      if (owner[k].second == 2) {
        if (got <= 0) {
          ::close(link.err_fd);
          link.err_fd = -1;
        } else {
          link.err_text.append(buffer, static_cast<size_t>(got));
          if (link.err_text.size() > kErrTextKept)
            link.err_text.erase(0, link.err_text.size() - kErrTextKept);
        }
        continue;
      }
      if (got <= 0) {
        link.out_closed = true;
        continue;
      }
      link.reader.feed(std::string_view(buffer, static_cast<size_t>(got)));
      while (true) {
        auto frame = link.reader.next();
        if (!frame.is_ok()) {
          link.failure = "host " + link.host + ": " + frame.status().message() +
                         " (is something on that host printing to stdout at login?)";
          break;
        }
        if (!frame->has_value()) break;
        handle_frame(link, **frame);
      }
    }
  }
}

}  // namespace hvrun::launcher

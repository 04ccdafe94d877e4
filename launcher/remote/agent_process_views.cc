#include "launcher/remote/agent_process_views.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autopsy/process_view.h"
#include "common/proc_state.h"

namespace hvrun::launcher {

namespace {
bool silent(const v1::AutopsyRankEntry& entry) {
  return !entry.answered() && !entry.has_process();
}

void note_unknown(v1::AutopsyJobReport& report, const std::string& host, const std::string& why) {
  for (v1::AutopsyRankEntry& entry : *report.mutable_ranks()) {
    if (entry.host() != host || !silent(entry)) continue;
    entry.mutable_process()->set_state("unknown");
    entry.mutable_process()->set_note(why);
  }
}
}  // namespace

AgentProcessViews::AgentProcessViews(boost::asio::io_context& io, Send send,
                                     std::chrono::milliseconds deadline)
    : io_(io), send_(std::move(send)), deadline_(deadline) {}

void AgentProcessViews::fill(v1::AutopsyJobReport report, Done done) {
  const int tag = next_tag_++;
  std::map<std::string, std::vector<std::string>> pids_by_host;
  for (const v1::AutopsyRankEntry& entry : report.ranks())
    if (silent(entry) && entry.pid() > 0)
      pids_by_host[entry.host()].push_back(std::to_string(entry.pid()));
  Request request{std::move(report), std::move(done), {}, nullptr};
  for (const auto& [host, pids] : pids_by_host) {
    if (send_(host, encode_frame("PROCESSES", {std::to_string(tag)}, join_list(pids))))
      request.waiting.insert(host);
    else
      note_unknown(request.report, host,
                   "the process runs on host " + host +
                       ", whose agent is gone: its state cannot be read");
  }
  if (request.waiting.empty()) {
    request.done(request.report);
    return;
  }
  request.timer = std::make_unique<boost::asio::steady_timer>(io_, deadline_);
  request.timer->async_wait([this, tag](boost::system::error_code ec) {
    if (ec) return;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(deadline_.count()) / 1000.0);
    finish(tag, std::string("did not answer within ") + seconds + " s");
  });
  requests_.emplace(tag, std::move(request));
}

void AgentProcessViews::on_reply(const std::string& host, const Frame& f) {
  auto it = requests_.find(static_cast<int>(f.int_arg(0)));
  if (it == requests_.end()) return;  // answered after its deadline
  Request& request = it->second;
  if (f.type == "PROCESSES_DONE") {
    request.waiting.erase(host);
    if (request.waiting.empty()) finish(it->first, "");
    return;
  }
  const long long pid = f.int_arg(1);
  std::optional<ProcessSnapshot> snapshot = decode_process_snapshot(f.payload);
  for (v1::AutopsyRankEntry& entry : *request.report.mutable_ranks()) {
    if (entry.host() != host || entry.pid() != pid || !silent(entry)) continue;
    if (snapshot) {
      *entry.mutable_process() = process_view_of(*snapshot, static_cast<pid_t>(pid));
      entry.mutable_process()->set_note("read by the agent on host " + host);
    } else {
      entry.mutable_process()->set_state("unknown");
      entry.mutable_process()->set_note("the agent on host " + host +
                                        " sent a malformed process state");
    }
  }
}

void AgentProcessViews::flush() {
  while (!requests_.empty())
    finish(requests_.begin()->first, "had not answered when the job ended");
}

void AgentProcessViews::finish(int tag, const std::string& why) {
  auto it = requests_.find(tag);
  if (it == requests_.end()) return;
  Request request = std::move(it->second);
  requests_.erase(it);
  if (request.timer) request.timer->cancel();
  for (const std::string& host : request.waiting)
    note_unknown(request.report, host,
                 "the process runs on host " + host + ", whose agent " + why);
  request.done(request.report);
}

}  // namespace hvrun::launcher

#include "autopsy/process_view.h"

#include "common/proc_state.h"

namespace hvrun {

v1::AutopsyProcessState read_process_view(pid_t pid) {
  return process_view_of(read_process_snapshot(pid), pid);
}

v1::AutopsyProcessState process_view_of(const ProcessSnapshot& snapshot, pid_t pid) {
  v1::AutopsyProcessState view;
  const std::optional<TaskState>& main = snapshot.main;
  if (!main) {
    view.set_state("gone");
    view.set_note(pid > 0 ? "no /proc/" + std::to_string(pid) + ": the process has exited"
                          : "the rank's process id is unknown (it never registered)");
    return view;
  }
  view.set_state(state_word(main->letter));
  view.set_state_letter(std::string(1, main->letter));
  view.set_wchan(main->wchan);
  view.set_syscall(main->syscall);
  for (const TaskState& task : snapshot.tasks) {
    v1::AutopsyThread* thread = view.add_threads();
    thread->set_tid(task.tid);
    thread->set_name(task.name);
    thread->set_state(std::string(1, task.letter));
    thread->set_wchan(task.wchan);
    thread->set_syscall(task.syscall);
  }
  return view;
}

void add_process_views(v1::AutopsyJobReport& report, bool ranks_are_local,
                       const std::string& this_host) {
  for (v1::AutopsyRankEntry& entry : *report.mutable_ranks()) {
    if (entry.answered() || entry.has_process()) continue;
    if (ranks_are_local || (!this_host.empty() && entry.host() == this_host)) {
      *entry.mutable_process() = read_process_view(entry.pid());
    } else {
      entry.mutable_process()->set_state("unknown");
      entry.mutable_process()->set_note(
          entry.pid() > 0 ? "the process runs on host " + entry.host() +
                                ", whose /proc only its agent can read"
                          : "the rank's process id is unknown (it never registered)");
    }
  }
}

}  // namespace hvrun

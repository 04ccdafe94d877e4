#include "launcher/plan/slurm_allocation.h"

#include <cctype>
#include <charconv>

namespace hvrun::launcher {
namespace {

// Splits at commas outside brackets.
std::vector<std::string> split_outside_brackets(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

std::optional<long> parse_number(const std::string& text) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

Status bad(const char* variable, const std::string& value, const std::string& why) {
  return invalid_argument(std::string("cannot read the Slurm allocation: ") + variable + "=" +
                          value + " (" + why + ")");
}

}  // namespace

Result<std::vector<std::string>> expand_slurm_hostlist(const std::string& compressed) {
  std::vector<std::string> hosts;
  for (const std::string& part : split_outside_brackets(compressed)) {
    if (part.empty()) return bad("SLURM_JOB_NODELIST", compressed, "an empty host name");
    const size_t open = part.find('[');
    if (open == std::string::npos) {
      hosts.push_back(part);
      continue;
    }
    const size_t close = part.find(']', open);
    if (close == std::string::npos || part.find('[', open + 1) != std::string::npos)
      return bad("SLURM_JOB_NODELIST", compressed, "unbalanced brackets in '" + part + "'");
    const std::string prefix = part.substr(0, open), suffix = part.substr(close + 1);
    for (const std::string& range : split_outside_brackets(part.substr(open + 1, close - open - 1))) {
      const size_t dash = range.find('-');
      const std::string first = range.substr(0, dash);
      const std::string last = dash == std::string::npos ? first : range.substr(dash + 1);
      auto lo = parse_number(first), hi = parse_number(last);
      if (!lo || !hi || *hi < *lo)
        return bad("SLURM_JOB_NODELIST", compressed, "bad range '" + range + "'");
      for (long n = *lo; n <= *hi; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
        hosts.push_back(prefix + digits + suffix);
      }
    }
  }
  return hosts;
}

Result<std::vector<int>> expand_slurm_tasks_per_node(const std::string& text) {
  std::vector<int> counts;
  for (const std::string& part : split_outside_brackets(text)) {
    const size_t open = part.find("(x");
    auto count = parse_number(part.substr(0, open));
    long repeat = 1;
    if (open != std::string::npos) {
      if (part.back() != ')') return bad("SLURM_TASKS_PER_NODE", text, "bad '" + part + "'");
      auto r = parse_number(part.substr(open + 2, part.size() - open - 3));
      if (!r) return bad("SLURM_TASKS_PER_NODE", text, "bad repeat in '" + part + "'");
      repeat = *r;
    }
    if (!count || *count < 0 || repeat < 1)
      return bad("SLURM_TASKS_PER_NODE", text, "bad '" + part + "'");
    for (long i = 0; i < repeat; ++i) counts.push_back(static_cast<int>(*count));
  }
  return counts;
}

Result<std::optional<SlurmAllocation>> slurm_allocation(const GetEnv& getenv) {
  const char* job_id = getenv("SLURM_JOB_ID");
  const char* nodelist = getenv("SLURM_JOB_NODELIST");
  if (job_id == nullptr || nodelist == nullptr) return std::optional<SlurmAllocation>();
  const char* tasks = getenv("SLURM_TASKS_PER_NODE");
  SlurmAllocation allocation;
  allocation.job_id = job_id;
  HVRUN_ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_slurm_hostlist(nodelist));
  std::vector<int> slots(hosts.size(), 1);
  if (tasks != nullptr) {
    allocation.tasks_per_node = tasks;
    HVRUN_ASSIGN_OR_RETURN(slots, expand_slurm_tasks_per_node(tasks));
    if (slots.size() != hosts.size())
      return bad("SLURM_TASKS_PER_NODE", tasks,
                 std::to_string(slots.size()) + " counts for the " + std::to_string(hosts.size()) +
                     " nodes of SLURM_JOB_NODELIST=" + nodelist);
  } else {
    allocation.tasks_per_node = "1(x" + std::to_string(hosts.size()) + ")";
  }
  for (size_t i = 0; i < hosts.size(); ++i) allocation.hosts.push_back(HostSlots{hosts[i], slots[i]});
  allocation.tasks_requested = getenv("SLURM_NTASKS") != nullptr;
  return std::optional<SlurmAllocation>(std::move(allocation));
}

bool describes_slurm_task(const std::string& name) {
  static const char* const kNames[] = {"SLURM_PROCID",   "SLURM_LOCALID",         "SLURM_NODEID",
                                       "SLURM_GTIDS",    "SLURM_TASK_PID",        "SLURM_NTASKS",
                                       "SLURM_NPROCS",   "SLURM_STEP_NUM_TASKS",
                                       "SLURM_STEP_TASKS_PER_NODE"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

Status refuse_many_launchers_in_one_step(const GetEnv& getenv) {
  const char* step = getenv("SLURM_STEP_ID");
  const char* tasks = getenv("SLURM_STEP_NUM_TASKS");
  if (step == nullptr || tasks == nullptr) return Status::ok();
  auto count = parse_number(tasks);
  if (!count || *count <= 1) return Status::ok();
  const char* task = getenv("SLURM_PROCID");
  return failed_precondition(
      std::string("hvrun is task ") + (task ? task : "?") + " of the " + tasks +
      " tasks of srun step " + (getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "?") + "." +
      step + ": each would start its own job. Run hvrun once, from the batch script or salloc "
      "(it starts its agents with srun), or srun the trainer itself against hvrun-coordinator "
      "(docs/slurm.md)");
}

Result<std::vector<HostSlots>> slurm_job_hosts(const SlurmAllocation& allocation,
                                               std::optional<int> num_proc,
                                               std::vector<std::string>* notes) {
  int total = 0;
  for (const HostSlots& h : allocation.hosts) total += h.slots;
  const std::string which = "Slurm allocation " + allocation.job_id;
  if (allocation.tasks_requested) {
    if (num_proc && *num_proc > total)
      return invalid_argument("-np " + std::to_string(*num_proc) + " is more than the " +
                              std::to_string(total) + " tasks of " + which +
                              " (SLURM_TASKS_PER_NODE=" + allocation.tasks_per_node +
                              "); lower -np or ask salloc/sbatch for more tasks");
    if (notes != nullptr)
      notes->push_back("hosts from " + which + ": SLURM_TASKS_PER_NODE=" +
                       allocation.tasks_per_node);
    return allocation.hosts;
  }
  // Without a task count Slurm's per-node count is the CPUs it gave each node, not ranks.
  const int nodes = static_cast<int>(allocation.hosts.size());
  if (!num_proc)
    return invalid_argument(which + " was made without a task count (SLURM_TASKS_PER_NODE=" +
                            allocation.tasks_per_node +
                            " counts CPUs): give -np, or ask salloc/sbatch for --ntasks-per-node");
  const int per_node = (*num_proc + nodes - 1) / nodes;
  std::vector<HostSlots> hosts = allocation.hosts;
  for (HostSlots& h : hosts) h.slots = per_node;
  if (notes != nullptr)
    notes->push_back(which + " was made without a task count: up to " +
                     std::to_string(per_node) + " ranks on each of its " +
                     std::to_string(nodes) + " nodes for -np " + std::to_string(*num_proc) +
                     " (salloc --ntasks-per-node makes it exact)");
  return hosts;
}

}  // namespace hvrun::launcher

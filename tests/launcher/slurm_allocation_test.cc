// Reading a Slurm allocation from the variables Slurm sets, and the agents' srun command line.
#include "launcher/plan/slurm_allocation.h"

#include <gtest/gtest.h>

#include <map>

#include "launcher/remote/remote_shell.h"

namespace hvrun::launcher {
namespace {

using Names = std::vector<std::string>;

GetEnv env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmAllocationTest, HostlistsExpandRangesListsAndPadding) {
  EXPECT_EQ(*expand_slurm_hostlist("hostA,hostB"), (Names{"hostA", "hostB"}));
  EXPECT_EQ(*expand_slurm_hostlist("node[01-03,7],gpu5"),
            (Names{"node01", "node02", "node03", "node7", "gpu5"}));
  EXPECT_EQ(*expand_slurm_hostlist("rack[9-11]-a"), (Names{"rack9-a", "rack10-a", "rack11-a"}));
  EXPECT_EQ(*expand_slurm_hostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  for (const char* bad : {"", "a,,b", "n[1-", "n[3-1]", "n[a-b]", "n[1[2]]"}) {
    auto r = expand_slurm_hostlist(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("SLURM_JOB_NODELIST="), std::string::npos);
  }
}

TEST(SlurmAllocationTest, TasksPerNodeExpandRepeats) {
  EXPECT_EQ(*expand_slurm_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*expand_slurm_tasks_per_node("4"), (std::vector<int>{4}));
  for (const char* bad : {"", "x", "2(x)", "2(x0)", "2(x3", "-1"})
    EXPECT_FALSE(expand_slurm_tasks_per_node(bad).is_ok()) << bad;
}

TEST(SlurmAllocationTest, OutsideAnAllocationThereIsNone) {
  auto none = slurm_allocation(env_of({}));
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  auto mismatch = slurm_allocation(env_of(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "2(x3)"}}));
  ASSERT_FALSE(mismatch.is_ok());
  EXPECT_NE(mismatch.status().message().find("3 counts for the 2 nodes"), std::string::npos)
      << mismatch.status().message();
}

TEST(SlurmAllocationTest, JobHostsFollowTheTaskCountOrSpreadWithoutOne) {
  // salloc -N2 --exclusive on 64-CPU nodes: the counts are CPUs, not ranks.
  auto made = slurm_allocation(env_of(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "64(x2)"}}));
  ASSERT_TRUE(made.is_ok() && made->has_value());
  const SlurmAllocation& by_nodes = **made;
  EXPECT_FALSE(by_nodes.tasks_requested);
  std::vector<std::string> notes;
  auto no_np = slurm_job_hosts(by_nodes, std::nullopt, &notes);
  ASSERT_FALSE(no_np.is_ok());
  EXPECT_NE(no_np.status().message().find("without a task count (SLURM_TASKS_PER_NODE=64(x2) "
                                          "counts CPUs): give -np"),
            std::string::npos)
      << no_np.status().message();
  // -np 3 (or 8): spread over both nodes, said.
  auto hosts = slurm_job_hosts(by_nodes, 3, &notes);
  ASSERT_TRUE(hosts.is_ok());
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].host, "b");
  EXPECT_EQ((*hosts)[1].slots, 2);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("up to 2 ranks on each of its 2 nodes for -np 3"), std::string::npos)
      << notes[0];
  hosts = slurm_job_hosts(by_nodes, 8, nullptr);
  ASSERT_TRUE(hosts.is_ok());
  EXPECT_EQ((*hosts)[0].slots, 4);

  auto tasks = slurm_allocation(env_of({{"SLURM_JOB_ID", "8"},
                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                        {"SLURM_TASKS_PER_NODE", "2(x2)"},
                                        {"SLURM_NTASKS", "4"}}));
  ASSERT_TRUE(tasks.is_ok() && tasks->has_value());
  EXPECT_TRUE((*tasks)->tasks_requested);
  EXPECT_TRUE(slurm_job_hosts(**tasks, 4, nullptr).is_ok());
  auto all = slurm_job_hosts(**tasks, std::nullopt, nullptr);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ((*all)[1].slots, 2);
  auto over = slurm_job_hosts(**tasks, 5, nullptr);
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find(
                "-np 5 is more than the 4 tasks of Slurm allocation 8 (SLURM_TASKS_PER_NODE=2(x2))"),
            std::string::npos)
      << over.status().message();
}

TEST(SlurmAllocationTest, HvrunAsEveryTaskOfAStepIsRefused) {
  EXPECT_TRUE(refuse_many_launchers_in_one_step(env_of({})).is_ok());
  EXPECT_TRUE(refuse_many_launchers_in_one_step(
                  env_of({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}))
                  .is_ok());
  Status many = refuse_many_launchers_in_one_step(env_of({{"SLURM_JOB_ID", "9"},
                                                          {"SLURM_STEP_ID", "0"},
                                                          {"SLURM_STEP_NUM_TASKS", "4"},
                                                          {"SLURM_PROCID", "2"}}));
  ASSERT_FALSE(many.is_ok());
  EXPECT_NE(many.message().find("hvrun is task 2 of the 4 tasks of srun step 9.0"),
            std::string::npos)
      << many.message();
}

TEST(SlurmAllocationTest, TaskVariablesStayBehind) {
  for (const char* name : {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"})
    EXPECT_TRUE(describes_slurm_task(name)) << name;
  for (const char* name : {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_CONF"})
    EXPECT_FALSE(describes_slurm_task(name)) << name;
  EXPECT_TRUE(shapes_srun_tasks("SLURM_GPUS_PER_TASK"));
  EXPECT_FALSE(shapes_srun_tasks("SLURM_JOB_ID"));
}

TEST(SlurmAllocationTest, AgentsStartAsOneTaskStepsPerNode) {
  RemoteShellOptions o;
  o.srun = true;
  o.srun_args = "--gres=gpu:4  --mpi=none";
  EXPECT_EQ(remote_agent_command(o, "node2", "/opt/hvrun/bin/hvrun"),
            (Names{"srun", "--nodes=1", "--ntasks=1", "--nodelist=node2", "--overlap", "--whole",
                   "--cpu-bind=none", "--unbuffered", "--kill-on-bad-exit=1", "--quiet", "--job-name=hvrun-agent",
                   "--gres=gpu:4", "--mpi=none", "/opt/hvrun/bin/hvrun", "agent"}));
}

}  // namespace
}  // namespace hvrun::launcher

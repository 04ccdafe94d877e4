"""`python train.py` without hvrun: a job of size 1, as Horovod runs it (the script itself is
single_process_train.py, run here as a user would, with no launcher variable set)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER_VARIABLES = ("HVRUN_COORDINATOR_ADDR", "HVRUN_SECRET", "HVRUN_RANK", "HVRUN_LOCAL_RANK",
                      "HVRUN_JOB_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                      "SLURM_STEP_NUM_TASKS")


def run_alone(script, extra_env=None):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(extra_env or {})
    return subprocess.run([sys.executable, os.path.join(HERE, script)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_script_alone_runs_as_a_job_of_size_one():
    r = run_alone("single_process_train.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "single process ok" in r.stdout
    said = re.findall(r"\[info\] no launcher .*a job of size 1", r.stderr)
    assert len(said) == 2, r.stderr  # once per init()
    pids = [int(p) for p in re.findall(r"coordinator of its own \(.*, pid (\d+)\)", r.stderr)]
    for pid in pids:  # reaped by the end
        try:
            os.kill(pid, 0)
            raise AssertionError(f"the private coordinator {pid} outlived the script")
        except ProcessLookupError:
            pass


def test_under_another_launchers_ranks_init_refuses():
    r = run_alone("single_process_train.py", {"PMI_SIZE": "2"})
    assert r.returncode != 0
    assert "another launcher started 2 ranks (PMI_SIZE=2)" in r.stderr, r.stderr

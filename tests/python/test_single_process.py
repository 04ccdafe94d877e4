"""`python train.py` without hvrun: a job of size 1, as Horovod runs it (the script itself is
single_process_train.py, run here as a user would, with no launcher variable set)."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER_VARIABLES = ("HVRUN_COORDINATOR_ADDR", "HVRUN_SECRET", "HVRUN_RANK", "HVRUN_LOCAL_RANK",
                      "HVRUN_JOB_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                      "SLURM_STEP_NUM_TASKS")


def alive(pid):
    """Running; a zombie nobody reaped yet has ended (a container's PID 1 may not reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


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
        assert not alive(pid), f"the private coordinator {pid} outlived the script"


def test_under_another_launchers_ranks_init_refuses():
    r = run_alone("single_process_train.py", {"PMI_SIZE": "2"})
    assert r.returncode != 0
    assert "another launcher started 2 ranks (PMI_SIZE=2)" in r.stderr, r.stderr


def test_a_killed_script_leaves_no_coordinator_behind():
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    script = ("import sys, time, hvrun\n"
              "hvrun.init()\n"
              "print('initialized', flush=True)\n"
              "time.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "initialized"
    finally:
        p.kill()
        err = p.communicate(timeout=30)[1]
    pids = [int(x) for x in re.findall(r"coordinator of its own \(.*, pid (\d+)\)", err)]
    assert len(pids) == 1, err
    # Not our child: it is reparented once the script died, and ends by itself, within seconds.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if not alive(pids[0]):
            return
        time.sleep(0.05)
    raise AssertionError(f"the private coordinator {pids[0]} outlived the killed script")

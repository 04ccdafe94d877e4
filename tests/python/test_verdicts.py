"""Verdicts told truly from Python (each test starts its own small hvrun job; every wait is
bounded and the job's process group is killed by pid if it overstays):
 - a rank that leaves cleanly (sys.exit(0)) while the others wait on a collective it never
   submitted is named as the job's cause, and the coordinator does not call the job finished;
 - one name used with two ops (allreduce 'm' on rank 0, allgather 'm' on rank 1) raises on both
   ranks within seconds, naming both, instead of hanging; legal asynchronous patterns under one
   name still run;
 - a worker of another job is refused by the coordinator by name, a missing secret is called
   missing."""
import os
import re
import subprocess
import sys

import pytest

from test_faults import hvrun_binary, run_job

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "verdict_worker.py")


@pytest.mark.parametrize("run", range(4))
def test_a_clean_early_exit_is_named_as_the_cause(run):
    code, out = run_job(["-np", "3", "--op-timeout", "60", "--grace-period", "5",
                         sys.executable, WORKER, "clean-exit-rank-1"], timeout=60)
    assert code != 0, out
    headline = [line for line in out.splitlines() if line.startswith("hvrun: job failed:")]
    assert len(headline) == 1, out
    # Its peers wait for it: both (ranks 0, 2), or the first to submit when rank 1 left first.
    assert re.match(r"hvrun: job failed: rank 1 left the job \(shut down\) "
                    r"without submitting allreduce 'allreduce\.after', which (ranks 0, 2 wait|"
                    r"rank [02] waits) for", headline[0]), out
    marked = [line for line in out.splitlines()
              if line.endswith(("<- first failure", "<- named by the coordinator"))]
    assert len(marked) == 1 and re.match(r"hvrun: 1 ", marked[0]), out
    assert "every rank said goodbye; the job is finished" not in out, out
    assert "NO ERROR" not in out, out


def assert_both_ranks_raised_within_seconds(out, pieces):
    for rank in (0, 1):
        raised = re.search(r"\[%d\]<stdout>:RAISED after ([0-9.]+) s: (.*)" % rank, out)
        assert raised, out
        assert float(raised.group(1)) < 10, out
        for piece in pieces:
            assert piece in raised.group(2), out


def test_one_name_with_two_ops_raises_on_both_ranks_within_seconds():
    # --op-timeout is long: the mismatch, not a timeout, must end the wait.
    code, out = run_job(["-np", "2", "--op-timeout", "120", sys.executable, WORKER,
                         "torch-name-two-ops"], timeout=60)
    assert_both_ranks_raised_within_seconds(out, [
        "the name 'm' was used for different collectives",
        "rank 0 submitted allreduce 'allreduce.m'", "rank 1 submitted allgather 'allgather.m'"])
    assert out.count("NEXT STEP OK") == 2, out
    assert code == 0, out


def test_async_ops_under_one_name_in_different_orders_still_run():
    code, out = run_job(["-np", "2", "--op-timeout", "60", sys.executable, WORKER,
                         "torch-async-orders"], timeout=60)
    assert code == 0, out
    assert out.count("ASYNC OK") == 2, out


def start_coordinator_of_job_b():
    """hvrun-coordinator --job-id adv-job-B for one rank; returns (process, address)."""
    binary = os.path.join(os.path.dirname(hvrun_binary()), "hvrun-coordinator")
    env = dict(os.environ, HVRUN_SECRET="identity-secret")
    proc = subprocess.Popen([binary, "--world-size", "1", "--job-id", "adv-job-B",
                             "--start-timeout", "5"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                            env=env, start_new_session=True)
    return proc, proc.stdout.readline().strip()


def init_worker(address, **identity):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HVRUN_")}
    env.update(PYTHONPATH=os.environ.get("PYTHONPATH", ""), HVRUN_COORDINATOR_ADDR=address,
               HVRUN_RANK="0", HVRUN_LOCAL_RANK="0", HVRUN_START_TIMEOUT="5")
    env.update({k: v for k, v in identity.items() if v is not None})
    return subprocess.run([sys.executable, "-c", "import hvrun.torch as hvd; hvd.init()"],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("identity,expected,absent", [
    ({"HVRUN_SECRET": "identity-secret", "HVRUN_JOB_ID": "other-job"},
     ["belongs to job 'other-job'", "runs job 'adv-job-B'"], None),
    ({"HVRUN_JOB_ID": "adv-job-B"}, ["no job secret"], "wrong"),
])
def test_a_worker_of_another_job_or_without_the_secret_is_refused_by_name(identity, expected,
                                                                          absent):
    proc, address = start_coordinator_of_job_b()
    try:
        result = init_worker(address, **identity)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert result.returncode != 0, result.stdout + result.stderr
    for piece in expected:
        assert piece in result.stderr, result.stderr
    if absent:
        assert absent not in result.stderr, result.stderr

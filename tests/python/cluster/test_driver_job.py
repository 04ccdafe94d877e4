"""hvrun.cluster, the driver core of hvrun.spark and hvrun.ray, with threads of this process as
the engine's tasks: a real hvrun-coordinator, real rank processes, real collectives."""
import hashlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import cloudpickle
import pytest

from hvrun.cluster import (DriverJob, JobFailed, JobSecret, payload, plan_ranks,
                           rank_environment, run_rank)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def run_job(fn, task_hosts, start_timeout=30, lines=None):
    """As an engine's driver would: one task per host entry, each a thread here."""
    slots = plan_ranks(task_hosts)
    with DriverJob("test", len(task_hosts), start_timeout=start_timeout) as job:
        outcomes = [None] * len(slots)

        def task(index):
            slot = slots[index]
            env = rank_environment(slot, job.identity, data_address="127.0.0.1",
                                   user_env={"OMP_NUM_THREADS": "1"})
            sink = None if lines is None else (lambda stream, line: lines.append((slot.rank, line)))
            outcomes[index] = run_rank(slot, payload(fn), env, job.secret.reveal(), sink)

        threads = [threading.Thread(target=task, args=(i,)) for i in range(len(slots))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        return job, job.results(outcomes)


def allreduce_rank():
    import numpy as np
    import hvrun
    hvrun.init()
    total = hvrun.allreduce(np.array([float(hvrun.rank())]), op=hvrun.Sum, name="ranks")
    print("rank %d says hello" % hvrun.rank())
    place = (hvrun.rank(), hvrun.size(), hvrun.local_rank(), hvrun.local_size(),
             os.environ["HVRUN_HOST"], float(total[0]),
             hashlib.sha256(os.environ["HVRUN_SECRET"].encode()).hexdigest())
    hvrun.shutdown()
    return place


def test_results_come_in_rank_order_with_hosts_grouped():
    lines = []
    job, results = run_job(allreduce_rank, ["hostA", "hostB", "hostA"], lines=lines)
    digest = hashlib.sha256(job.secret.reveal().encode()).hexdigest()
    # Ranks are contiguous per host: tasks 0 and 2 (hostA) are ranks 0 and 1.
    assert [r[:5] for r in results] == [(0, 3, 0, 2, "hostA"), (1, 3, 1, 2, "hostA"),
                                        (2, 3, 0, 1, "hostB")]
    assert all(r[5] == 3.0 for r in results)
    assert all(r[6] == digest for r in results)
    assert (2, "rank 2 says hello") in lines
    assert job.coordinator.exit_code() is not None  # ended, and reaped


def killed_in_rank_1():
    import numpy as np
    import hvrun
    hvrun.init()
    if hvrun.rank() == 1:
        os._exit(7)
    hvrun.allreduce(np.ones(4), name="never_completes")
    return "unreachable"


def test_a_killed_rank_is_named_with_its_host_and_cause():
    with pytest.raises(JobFailed) as failed:
        run_job(killed_in_rank_1, ["h0", "h1", "h2"])
    first = failed.value.failures[0]
    assert (first.rank, first.host, first.collateral) == (1, "h1", False)
    assert "exited with code 7 before returning" in first.cause
    assert "rank 1 on host h1: its process exited with code 7" in str(failed.value)
    # The others failed because of it, and say so after it.
    assert sorted(o.rank for o in failed.value.failures) == [0, 1, 2]


def raises_in_rank_0():
    import hvrun
    hvrun.init()
    if hvrun.rank() == 0:
        raise ValueError("bad batch")
    hvrun.barrier()
    return "unreachable"


def test_an_exception_is_named_with_its_text():
    with pytest.raises(JobFailed) as failed:
        run_job(raises_in_rank_0, ["h0", "h1"])
    first = failed.value.failures[0]
    assert first.rank == 0 and "ValueError: bad batch" in first.cause
    assert "raises_in_rank_0" in first.cause


def test_the_coordinator_ends_on_an_interrupt_and_never_sees_argv_secret():
    job = DriverJob("test", 2, start_timeout=30)
    with pytest.raises(KeyboardInterrupt):
        with job:
            pid = job.coordinator.pid
            with open("/proc/%d/cmdline" % pid, "rb") as cmdline:
                assert job.secret.reveal().encode() not in cmdline.read()
            with open("/proc/%d/environ" % pid, "rb") as environ:
                assert job.secret.reveal().encode() not in environ.read()
            raise KeyboardInterrupt
    assert job.coordinator.exit_code() is not None
    assert not os.path.exists("/proc/%d" % pid)


def test_the_secret_cannot_travel_in_a_pickle_or_a_repr():
    secret = JobSecret()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(secret)
    with pytest.raises(TypeError):
        cloudpickle.dumps(lambda: secret.reveal())
    assert secret.reveal() not in repr(secret) + str(secret) + "%s" % secret


TASK_PROCESS = """
import os, sys, time
from hvrun.cluster import RankSlot, payload, run_rank

def sleep_as_rank(pid_file):
    with open(pid_file, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(600)

run_rank(RankSlot(0, "h0", 0, 1, 0, 1, 1), payload(sleep_as_rank, (sys.argv[1],)), {}, "s")
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_rank_dies_with_the_task_process_that_started_it(tmp_path):
    pid_file = tmp_path / "rank.pid"
    task = subprocess.Popen([sys.executable, "-c", TASK_PROCESS, str(pid_file)])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the rank never started"
            time.sleep(0.1)
        rank_pid = int(pid_file.read_text())
        assert alive(rank_pid)
    finally:
        os.kill(task.pid, signal.SIGKILL)
        task.wait()
    deadline = time.monotonic() + 10
    while alive(rank_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(rank_pid):
        os.kill(rank_pid, signal.SIGKILL)
        pytest.fail("rank pid %d outlived its task process" % rank_pid)

"""RayExecutor on a real two-node Ray cluster (conftest.py): a 4-rank hvrun.torch training
ends with the weights of the same training under `hvrun -np 4`, a killed worker fails the run
naming it, nothing of the job stays behind, and the job secret reaches no Ray log."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ray_train

HERE = os.path.dirname(os.path.abspath(__file__))


def _hvrun():
    return os.path.join(os.environ["HVRUN_BIN_DIR"], "hvrun")


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose here (its parent, a raylet, reaps it later).
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if process_alive(p)]
        if not left:
            return []
        time.sleep(0.2)
    return left


def files_holding(folder, text):
    """Files below `folder` that contain `text`."""
    found = []
    for parent, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(parent, name)
            try:
                with open(path, "rb") as f:
                    if text.encode() in f.read():
                        found.append(path)
            except OSError:
                pass
    return found


def _executor(**kwargs):
    from hvrun.ray import RayExecutor
    settings = RayExecutor.create_settings(timeout_s=60)
    return RayExecutor(settings, **kwargs)


def _job_pids(executor):
    pids = [s.pid for s in executor._slots]
    if executor._coordinator is not None:
        pids.append(executor._coordinator.pid)
    return pids


def test_training_matches_hvrun_np4(ray_cluster, tmp_path):
    # Two Ray nodes x two workers: ranks 0-1 on the head, 2-3 on the other node.
    executor = _executor(num_hosts=2, num_workers_per_host=2)
    executor.start()
    try:
        hosts = executor.run(lambda: (os.environ["HVRUN_HOST"], os.environ["HVRUN_LOCAL_RANK"]))
        assert [h[1] for h in hosts] == ["0", "1", "0", "1"]
        assert hosts[0][0] == hosts[1][0] != hosts[2][0] == hosts[3][0]
        weights = executor.run(ray_train.train)
        # A second run on the same workers (each shut hvrun down: a fresh coordinator).
        again = executor.run(ray_train.train)
        pids = _job_pids(executor)
        secret = executor._secret.reveal()
    finally:
        executor.shutdown()
    assert _wait_gone(pids) == []
    for w in weights[1:] + again:
        np.testing.assert_array_equal(w, weights[0])

    # The same training under hvrun, its ranks claiming the same two hosts.
    out = str(tmp_path / "w")
    subprocess.run(
        [_hvrun(), "-np", "4", "--op-timeout", "60", "/bin/sh", "-c",
         'HVRUN_HOST=simhost$((HVRUN_RANK / 2)) HVRUN_LOCAL_RANK=$((HVRUN_RANK % 2)) '
         'exec "$0" "$@"', sys.executable, os.path.join(HERE, "ray_train.py"), out],
        check=True, timeout=180)
    for rank in range(4):
        np.testing.assert_array_equal(np.load("%s.%d.npy" % (out, rank)), weights[0])

    # The secret went to the workers sealed: no Ray log, object spill or session file has it.
    assert files_holding(ray_cluster.session_dir(), secret) == []


def test_killed_worker_fails_the_run_naming_it(ray_cluster):
    from hvrun.ray import JobFailed
    from ray.util import placement_group_table
    executor = _executor(num_workers=4)
    executor.start()
    pids = _job_pids(executor)
    group = executor._placement_group
    try:
        with pytest.raises(JobFailed) as failure:
            executor.run(ray_train.train, kwargs=dict(steps=200, kill_rank=2, kill_step=5))
        pids = _job_pids(executor) or pids
    finally:
        executor.shutdown()
    first = failure.value.failures[0]
    victim = pids[2]
    assert first.rank == 2 and not first.collateral
    assert "its worker process (pid %d on Ray node" % victim in first.cause
    assert "died" in first.cause
    assert "rank 2 on host %s: its worker process" % first.host in str(failure.value)
    assert _wait_gone(pids + [victim]) == []
    assert placement_group_table(group)["state"] == "REMOVED"
    assert executor.workers == []


def test_driver_interrupt_ends_the_job(ray_cluster, tmp_path):
    # A driver of its own, interrupted (SIGINT) while its ranks train: it ends every worker
    # and the coordinator before it exits.
    import ray
    driver = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "interrupted_driver.py"),
         ray.get_runtime_context().gcs_address, str(tmp_path / "training")],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        pids = [int(p) for p in driver.stdout.readline().split()]
        assert len(pids) == 5, "the driver printed no pids"
        driver.send_signal(signal.SIGINT)
        assert driver.wait(60) != 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert _wait_gone(pids) == []


def test_gpu_slots_are_pinned_by_local_rank(ray_cluster):
    # Logical GPUs (2 a node): each worker sees its node's GPUs with its own at its local rank.
    executor = _executor(num_workers=4, use_gpu=True)
    executor.start()
    try:
        seen = executor.run(lambda: (os.environ["HVRUN_LOCAL_RANK"],
                                     os.environ["CUDA_VISIBLE_DEVICES"],
                                     [str(g) for g in __import__("ray").get_gpu_ids()]))
    finally:
        executor.shutdown()
    for local_rank, visible, own in seen:
        assert visible.split(",")[int(local_rank)] == own[0]
        assert sorted(visible.split(",")) == ["0", "1"]

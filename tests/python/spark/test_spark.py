"""hvrun.spark.run on a real Spark cluster in local-cluster mode (two executor JVMs), started
once for the module: a training equal to the same one under `hvrun -np 4`, a killed rank named,
too few task slots refused, the secret kept out of Spark's logs and task arguments, and nothing
left running after the driver's Ctrl-C."""
import _thread
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import cloudpickle
import pytest

import spark_cluster
import train_job

HERE = os.path.dirname(os.path.abspath(__file__))
cloudpickle.register_pickle_by_value(train_job)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def spark():
    if spark_cluster.java_missing():
        pytest.skip("Java cannot start here: no java on PATH and no JAVA_HOME (scripts/install-deps "
                    "installs openjdk-17-jre-headless)")
    folder = tempfile.mkdtemp(prefix="hvrun-spark-")
    session = spark_cluster.start(folder, os.environ.get("PYTHONPATH", ""))
    session.folder = folder
    try:
        spark_cluster.wait_for_executors(session, 2, 240)
        yield session
    finally:
        session.stop()
        shutil.rmtree(folder, ignore_errors=True)


def run(**kwargs):
    import hvrun.spark
    kwargs.setdefault("start_timeout", 120)
    return hvrun.spark.run(**kwargs)


def test_training_ends_with_the_weights_of_the_same_run_under_hvrun(spark, tmp_path):
    results = run(fn=train_job.train, num_proc=4, verbose=0)
    assert len(results) == 4
    assert all(weights == results[0] for weights in results[1:])

    out = tmp_path / "weights.json"
    hvrun = os.path.join(os.environ["HVRUN_BIN_DIR"], "hvrun")
    subprocess.run([hvrun, "-np", "4", "--op-timeout", "60", sys.executable,
                    os.path.join(HERE, "train_job.py"), str(out)], check=True, timeout=240)
    assert json.loads(out.read_text()) == results[0]


def kill_rank_2():
    import numpy as np
    import hvrun
    hvrun.init()
    if hvrun.rank() == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    hvrun.allreduce(np.ones(8), name="after_the_kill")
    return hvrun.rank()


def test_a_killed_rank_fails_the_run_naming_it(spark):
    from hvrun.cluster import JobFailed
    with pytest.raises(JobFailed) as failed:
        run(fn=kill_rank_2, num_proc=4, verbose=0)
    first = failed.value.failures[0]
    assert (first.rank, first.host) == (2, "127.0.0.1")
    assert "killed by SIGKILL" in first.cause
    assert "rank 2 on host 127.0.0.1: its process was killed by SIGKILL" in str(failed.value)
    assert "rank 2" in failed.value.coordinator_verdict


def test_too_few_task_slots_fail_clearly(spark):
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"num_proc=5 needs 5 Spark tasks running at once .* "
                                           r"the cluster has 4 task slots"):
        run(fn=kill_rank_2, num_proc=5, start_timeout=2)
    assert time.monotonic() - started < 30


def secret_digest():
    import hvrun
    hvrun.init()
    hvrun.barrier()
    digest = hashlib.sha256(os.environ["HVRUN_SECRET"].encode()).hexdigest()
    hvrun.shutdown()
    return digest


def test_the_secret_stays_out_of_spark_logs_and_task_arguments(spark, monkeypatch):
    import hvrun.cluster.driver_job as driver_job
    import pyspark.core.rdd as spark_rdd

    secrets_made, commands = [], []

    class RecordedSecret(driver_job.JobSecret):
        __slots__ = ()

        def __init__(self):
            super().__init__()
            secrets_made.append(self.reveal())

    real_prepare = spark_rdd._prepare_for_python_RDD

    def recording_prepare(sc, command):
        prepared = real_prepare(sc, command)
        commands.append((bytes(prepared[0]), repr(prepared[2])))
        return prepared

    monkeypatch.setattr(driver_job, "JobSecret", RecordedSecret)
    monkeypatch.setattr(spark_rdd, "_prepare_for_python_RDD", recording_prepare)
    digests = run(fn=secret_digest, num_proc=4, verbose=1)
    [secret] = secrets_made
    # It reached every rank...
    assert digests == [hashlib.sha256(secret.encode()).hexdigest()] * 4
    # ...but not the task's pickled function, Spark's environment for the tasks,
    assert commands and all(secret.encode() not in command and secret not in environment
                            for command, environment in commands)
    # nor any file Spark wrote: its log, the event log, the executors' stdout and stderr.
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    written = 0
    for folder, _, files in os.walk(spark.folder):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as content:
                data = content.read()
            written += len(data)
            assert secret.encode() not in data, path
    assert written > 0


def sleep_forever(folder):
    import hvrun
    hvrun.init()
    with open(os.path.join(folder, "rank-%d.pid" % hvrun.rank()), "w") as out:
        out.write(str(os.getpid()))
    hvrun.barrier()
    time.sleep(600)


def coordinators_of_this_process():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as stat:
                parent = int(stat.read().rpartition(")")[2].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as cmdline:
                program = cmdline.read().split(b"\0")[0]
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and program.endswith(b"hvrun-coordinator"):
            found.append(int(pid))
    return found


def test_nothing_runs_on_after_the_driver_is_interrupted(spark, tmp_path):
    def interrupt_once_all_ranks_run():
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("rank-*.pid"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_once_all_ranks_run, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run(fn=sleep_forever, args=(str(tmp_path),), num_proc=4, verbose=0)
    pids = [int(p.read_text()) for p in tmp_path.glob("rank-*.pid")]
    assert len(pids) == 4
    deadline = time.monotonic() + 30
    while any(os.path.exists("/proc/%d" % pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in pids if os.path.exists("/proc/%d" % pid)] == []
    assert coordinators_of_this_process() == []

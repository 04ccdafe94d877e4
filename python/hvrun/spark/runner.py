"""hvrun.spark.run: Horovod's horovod.spark.run on hvrun (docs/spark.md)."""
import itertools
import os
import socket
import sys
import threading
import time

from hvrun.cluster import DriverJob, payload
from hvrun.spark.barrier_task import make_task
from hvrun.spark.task_slots import wait_for_slots

_DEFAULT_START_TIMEOUT_S = 600
# After a cancel, how long the Spark job may take to end its tasks.
_CANCEL_GRACE_S = 30.0
_job_numbers = itertools.count()


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, use_mpi=None, use_gloo=None,  # noqa: B006 - Horovod's signature
        extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1, nics=None,
        prefix_output_with_timestamp=False):
    """Runs `fn(*args, **kwargs)` as `num_proc` hvrun ranks, one per task of a Spark barrier
    stage, and returns each rank's result, rank 0 first.

    num_proc: ranks (= Spark tasks running at once); default spark.default.parallelism.
    start_timeout: seconds for the cluster to offer the task slots and for every rank to join
        the job; default HVRUN_SPARK_START_TIMEOUT, else HOROVOD_SPARK_START_TIMEOUT, else 600.
    env: variables added to every rank's environment (over its executor's), and to the
        coordinator's (HVRUN_* settings apply to the job).
    stdout, stderr: where the ranks' lines go ("[rank]<stdout>:line"), when each rank ends;
        default sys.stdout, sys.stderr. The executors' logs have them as they come.
    verbose: 0 quiet; 1 the coordinator's lines on stderr; 2 also where each rank runs.
    nics: interface names for the ranks' data plane (GLOO_SOCKET_IFNAME).
    use_mpi=True, use_gloo=False, extra_mpi_args: refused (hvrun has no MPI data plane).

    Raises hvrun.cluster.JobFailed naming each failed rank, its host and cause; RuntimeError
    when the cluster has fewer task slots than num_proc. Ends the Spark job and the
    coordinator on every way out, Ctrl-C included."""
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("hvrun.spark.run: no active SparkContext: start a SparkSession first")
    if use_mpi or use_gloo is False or extra_mpi_args:
        raise ValueError("hvrun.spark.run: use_mpi=True, use_gloo=False and extra_mpi_args ask "
                         "for MPI, which hvrun does not use: its ranks talk over shared memory "
                         "and Gloo (NCCL on GPUs); leave them out")
    start_timeout = _start_timeout(start_timeout)
    num_proc = int(num_proc or sc.defaultParallelism)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    slots = wait_for_slots(sc, num_proc, start_timeout)
    if verbose >= 2:
        stderr.write("hvrun.spark.run: %d ranks on a cluster of %d task slots\n" % (num_proc, slots))
    coordinator_env = dict(os.environ)
    coordinator_env.update(env or {})
    with DriverJob("hvrun.spark.run", num_proc, _driver_address(sc), start_timeout,
                   coordinator_env, stderr if verbose >= 1 else False) as job:
        secret = sc.broadcast(job.secret.reveal())
        try:
            task = make_task(payload(fn, args, kwargs), job.identity, secret, env, nics)
            returned = _run_barrier_stage(sc, num_proc, task, job.job_id)
        finally:
            secret.destroy()
        returned.sort(key=lambda r: r[0].rank)
        for outcome, lines, dropped in returned:
            _write_output(outcome.rank, lines, dropped, stdout, stderr, prefix_output_with_timestamp)
            if verbose >= 2:
                stderr.write("hvrun.spark.run: rank %d ran on %s\n" % (outcome.rank, outcome.host))
        return job.results([outcome for outcome, _, _ in returned])


def _start_timeout(given):
    if given is not None:
        return float(given)
    for name in ("HVRUN_SPARK_START_TIMEOUT", "HOROVOD_SPARK_START_TIMEOUT"):
        value = os.environ.get(name)
        if value:
            try:
                return float(value)
            except ValueError:
                raise ValueError("%s=%r: expected seconds" % (name, value)) from None
    return float(_DEFAULT_START_TIMEOUT_S)


def _driver_address(sc):
    """The address executors reach the driver at (spark.driver.host), for the coordinator."""
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    return socket.gethostbyname(host)


def _run_barrier_stage(sc, num_proc, task, job_id):
    """Runs `task` on `num_proc` barrier tasks and returns their results. The Spark job runs in
    a thread of its own, so that this thread stays interruptible: on any exception here (Ctrl-C)
    the job group is cancelled, which kills the tasks' Python workers and, with them, the ranks
    (hvrun.cluster.run_rank)."""
    group = "hvrun.spark.run.%s.%d" % (job_id, next(_job_numbers))
    result, failure = [], []

    def collect():
        try:
            sc.setJobGroup(group, "hvrun.spark.run: %d ranks of hvrun job %s" % (num_proc, job_id),
                           interruptOnCancel=True)
            rdd = sc.parallelize(range(num_proc), num_proc)
            result.extend(rdd.barrier().mapPartitions(task).collect())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=collect, name="hvrun-spark-job", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except BaseException:
        sc.cancelJobGroup(group)
        thread.join(_CANCEL_GRACE_S)
        raise
    if failure:
        raise RuntimeError("hvrun.spark.run: the Spark job of the ranks failed: %s" % failure[0]) \
            from failure[0]
    return result


def _write_output(rank, lines, dropped, stdout, stderr, with_time):
    if dropped:
        stderr.write("[%d]<stderr>:(hvrun.spark: %d earlier lines left out here; the executor's "
                     "log has them)\n" % (rank, dropped))
    for stream, line, when in lines:
        target = stdout if stream == "stdout" else stderr
        stamp = time.strftime("%a %b %d %H:%M:%S %Y ", time.localtime(when)) if with_time else ""
        target.write("%s[%d]<%s>:%s\n" % (stamp, rank, stream, line))
    stdout.flush()
    stderr.flush()

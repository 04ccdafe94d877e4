"""How many tasks the Spark cluster can run at once: a barrier stage needs all of its tasks
running together, and Spark itself only notices too few slots after minutes of retries
(spark.scheduler.barrier.maxConcurrentTasksCheck.*)."""
import time

_POLL_S = 0.5


def concurrent_task_slots(sc):
    """Tasks the registered executors can run at once (their cores / spark.task.cpus)."""
    jsc = sc._jsc.sc()
    try:
        return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
    except Exception:  # noqa: BLE001 - an older Spark without resource profiles
        return int(sc.defaultParallelism)


def executor_ids(sc):
    """The registered executors' ids, for messages."""
    try:
        return str(sc._jsc.sc().getExecutorIds().mkString(", "))
    except Exception:  # noqa: BLE001 - only a message's detail
        return "unknown"


def wait_for_slots(sc, num_proc, timeout):
    """Returns once the cluster has `num_proc` task slots; past `timeout` s (executors may still
    be starting), raises RuntimeError saying what it has and what to change."""
    deadline = time.monotonic() + timeout
    while True:
        slots = concurrent_task_slots(sc)
        if slots >= num_proc:
            return slots
        if time.monotonic() >= deadline:
            raise RuntimeError(
                "hvrun.spark.run: num_proc=%d needs %d Spark tasks running at once (a barrier "
                "stage), but the cluster has %d task slots (executors: %s; spark.task.cpus=%s) "
                "after waiting %.0f s (start_timeout): lower num_proc, or give the cluster more "
                "executors or cores" % (
                    num_proc, num_proc, slots, executor_ids(sc) or "none",
                    sc.getConf().get("spark.task.cpus", "1"), timeout))
        time.sleep(_POLL_S)

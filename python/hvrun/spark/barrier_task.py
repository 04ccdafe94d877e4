"""What each Spark task of hvrun.spark.run does, on its executor: find its rank from the hosts
of the barrier stage's tasks, and run the function as that rank in a process of its own
(hvrun.cluster.run_rank). It never raises for the rank's failure: the outcome names it and goes
back to the driver as the task's result, so Spark does not retry the stage (a retried rank
would join a job that has already ended)."""
import collections
import sys
import time

from hvrun.cluster import local_address_towards, plan_ranks, rank_environment, run_rank

# Each rank's last lines kept for the driver's stdout and stderr; the executor's logs have all.
OUTPUT_LINES_KEPT = 100000


class RankOutput:
    """A rank's lines (stream, text, time), in order, at most OUTPUT_LINES_KEPT of them (the
    last ones)."""

    def __init__(self, rank):
        self.rank = rank
        self.lines = collections.deque(maxlen=OUTPUT_LINES_KEPT)
        self.dropped = 0

    def __call__(self, stream, line):
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append((stream, line, time.time()))
        # The executor's own log has every line as it comes.
        target = sys.stdout if stream == "stdout" else sys.stderr
        target.write("[%d]<%s>:%s\n" % (self.rank, stream, line))
        target.flush()


def make_task(fn_payload, identity, secret_broadcast, user_env, nics):
    """The function of `rdd.barrier().mapPartitions`. It holds no secret: `secret_broadcast`
    pickles as a broadcast id, and its value is read on the executor."""
    user_env = dict(user_env or {})
    nics = list(nics or [])

    def task(_rows):
        from pyspark import BarrierTaskContext
        context = BarrierTaskContext.get()
        hosts = [info.address.rpartition(":")[0] for info in context.getTaskInfos()]
        slot = plan_ranks(hosts)[context.partitionId()]
        env = dict(user_env)
        if nics:
            env["GLOO_SOCKET_IFNAME"] = ",".join(nics)
            data_address = None  # the worker library binds the named interface
        else:
            data_address = local_address_towards(identity.coordinator_address)
        env = rank_environment(slot, identity, data_address, env)
        output = RankOutput(slot.rank)
        outcome = run_rank(slot, fn_payload, env, secret_broadcast.value, output)
        yield outcome, list(output.lines), output.dropped

    return task

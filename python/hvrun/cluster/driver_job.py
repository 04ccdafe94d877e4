"""One job's life on the driver of a cluster engine: the secret, the coordinator, the results.

    with DriverJob("hvrun.spark", size=4, listen_host=driver_ip) as job:
        ...hand job.secret to the ranks by the engine's own channel, start them with
           job.identity (rank_environment), gather their RankOutcomes...
        return job.results(outcomes)

Leaving the block ends the coordinator, by pid, whatever ended it: success, an exception, a
KeyboardInterrupt. The engine's part (cancelling its tasks) is the engine module's.
"""
import secrets

from hvrun.cluster.coordinator_daemon import CoordinatorDaemon
from hvrun.cluster.job_secret import JobSecret
from hvrun.cluster.outcome import results_in_rank_order
from hvrun.cluster.rank_environment import JobIdentity

# After the last rank returned, how long the coordinator may take to end by itself: on every
# goodbye (success), or with its verdict (failure).
_SUCCESS_GRACE_S = 3.0
_FAILURE_GRACE_S = 10.0
_VERDICT_LINES = 20


class DriverJob:
    def __init__(self, engine, size, listen_host="127.0.0.1", start_timeout=None, env=None,
                 coordinator_stderr=None):
        """`engine`: names the caller in messages ("hvrun.spark"). `size`: the number of ranks.
        `listen_host`: the driver's address the ranks can reach. `start_timeout` (s): how long
        the coordinator waits for every rank to register. `env`: the coordinator's environment
        (HVRUN_* settings apply to the job). `coordinator_stderr`: where its lines are copied
        (the driver's stderr when None, nowhere when False)."""
        if size < 1:
            raise ValueError("%s: a job needs at least one rank, not %d" % (engine, size))
        self.engine = engine
        self.size = size
        self.secret = JobSecret()
        self.job_id = "hvrun-" + secrets.token_hex(4)
        self.coordinator = None
        self.identity = None
        self._listen = "%s:0" % listen_host
        self._start_timeout = start_timeout
        self._env = env
        self._coordinator_stderr = coordinator_stderr

    def __enter__(self):
        self.coordinator = CoordinatorDaemon.start(
            self.size, self.secret, self.job_id, listen=self._listen,
            start_timeout=self._start_timeout, env=self._env, stderr=self._coordinator_stderr)
        self.identity = JobIdentity(self.job_id, self.coordinator.address)
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        if self.coordinator is not None:
            self.coordinator.stop()

    def verdict(self):
        """What the coordinator said of the job's end (its first cause when the job failed):
        its "job ended" line, else its last lines, else ""."""
        if self.coordinator is None:
            return ""
        lines = self.coordinator.stderr_text().splitlines()
        ended = [line for line in lines if "job ended:" in line]
        return ended[-1] if ended else "\n".join(lines[-_VERDICT_LINES:])

    def results(self, outcomes):
        """Each rank's result in rank order, or JobFailed naming every failed rank with its host
        and cause, and the coordinator's verdict."""
        succeeded = len(outcomes) == self.size and all(outcome.ok for outcome in outcomes)
        # Ranks that said goodbye end it at once; a failed job's verdict comes as it ends.
        self.coordinator.wait(_SUCCESS_GRACE_S if succeeded else _FAILURE_GRACE_S)
        return results_in_rank_order(self.engine, outcomes, self.size,
                                     "" if succeeded else self.verdict())

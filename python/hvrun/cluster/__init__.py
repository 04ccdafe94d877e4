"""What a cluster engine's driver needs to run an hvrun job whose ranks the engine starts
(hvrun.spark, hvrun.ray): the same job hvrun's launcher runs, with the engine placing the ranks.

On the driver (`DriverJob`): a fresh job secret (`JobSecret`), `hvrun-coordinator` started with
it on stdin and stopped by pid however the driver leaves, and each rank's outcome gathered into
results in rank order or one exception naming each failed rank, its host and cause.

Where each rank runs (`run_rank`): its place in the job from the hosts of all tasks
(`plan_ranks`: ranks contiguous per host, local rank and host index as hvrun's launcher gives),
the variables hvrun's launcher gives a worker (`rank_environment`), and a process of its own that
runs the function with them and the secret.

The secret: never in task arguments, command lines or logs. `JobSecret` refuses to be pickled,
so a closure that captured it fails instead of shipping it. Each engine hands the value over by
a channel it does not log (Spark: a broadcast variable, fetched by the executors through Spark's
block manager, which `spark.authenticate` / `spark.network.crypto.enabled` protect; the task
closure carries only the broadcast's id). The rank puts it in the environment of its own process
only: on a host, the user who runs the executors can read it in /proc, as they can read
everything the executor holds.
"""
from hvrun.cluster.coordinator_daemon import CoordinatorDaemon, find_daemon
from hvrun.cluster.driver_job import DriverJob
from hvrun.cluster.job_secret import JobSecret
from hvrun.cluster.outcome import JobFailed, RankOutcome, results_in_rank_order
from hvrun.cluster.rank_environment import JobIdentity, local_address_towards, rank_environment
from hvrun.cluster.rank_layout import RankSlot, plan_ranks
from hvrun.cluster.rank_process import payload, run_rank

__all__ = [
    "CoordinatorDaemon", "DriverJob", "JobFailed", "JobIdentity", "JobSecret", "RankOutcome",
    "RankSlot", "find_daemon", "local_address_towards", "payload", "plan_ranks",
    "rank_environment", "results_in_rank_order", "run_rank",
]

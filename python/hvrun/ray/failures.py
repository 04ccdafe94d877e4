"""Waiting on the workers' calls, and turning the first failure into an error that names the
rank, its host and the cause."""
import time


class WorkerFailedError(RuntimeError):
    """A worker of a Ray job failed: `rank`, `host`, `node_id`, `pid` and `cause` say which and
    why. The job has been ended on every worker when this is raised."""

    def __init__(self, message, rank, host, node_id, pid, cause):
        super().__init__(message)
        self.rank, self.host, self.node_id, self.pid, self.cause = rank, host, node_id, pid, cause


# After the first failure, how long the other calls may take to end before the first cause is
# chosen: a killed worker is reported to the driver later than the survivors' errors about it.
_SETTLE_S = 10.0


def gather(refs, slots, timeout_s=None):
    """ray.get of one call per slot, in rank order. On failure: WorkerFailedError for the first
    cause (a worker that died before one that raised, since a lost peer makes the others raise
    too), once every call ended or _SETTLE_S passed."""
    import ray
    pending = {ref: slot for ref, slot in zip(refs, slots)}
    failures = []
    settle_deadline = None
    overall_deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while pending:
        now = time.monotonic()
        if settle_deadline is not None and now >= settle_deadline:
            break
        if overall_deadline is not None and now >= overall_deadline:
            raise TimeoutError("hvrun.ray: %s still running after %s s" % (
                ", ".join(pending[r].describe() for r in pending), timeout_s))
        done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in done:
            slot = pending.pop(ref)
            try:
                ray.get(ref)
            except Exception as error:  # what the call raised, or how its worker ended
                failures.append((slot, error))
                if settle_deadline is None:
                    settle_deadline = time.monotonic() + _SETTLE_S
    if failures:
        raise _first_cause(failures)
    return ray.get(refs)


def _first_cause(failures):
    import ray.exceptions as rex
    died = [(s, e) for s, e in failures if isinstance(e, rex.RayActorError)]
    slot, error = (died or failures)[0]
    if isinstance(error, rex.RayActorError):
        cause = "the worker process died: %s" % _short(error)
    elif isinstance(error, rex.RayTaskError):
        inner = error.cause if getattr(error, "cause", None) is not None else error
        cause = "%s: %s" % (type(inner).__name__, _short(inner))
    else:
        cause = "%s: %s" % (type(error).__name__, _short(error))
    others = sorted(s.rank for s, _ in failures if s is not slot)
    message = "hvrun.ray: %s failed: %s" % (slot.describe(), cause)
    if others:
        message += " (then rank(s) %s failed too)" % ", ".join(map(str, others))
    message += "; the job was ended on every worker"
    return WorkerFailedError(message, slot.rank, slot.host, slot.node_id, slot.pid, cause)


def _short(error, limit=600):
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + " ..."

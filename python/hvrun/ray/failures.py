"""Waiting on the workers' calls, and turning failures into hvrun.cluster's JobFailed, which
names each failed rank, its host and the cause, first causes first."""
import time

from hvrun.cluster import JobFailed, RankOutcome

ENGINE = "hvrun.ray"

# After the first failure, how long the other calls may take to end before the driver raises:
# a killed worker's death reaches the driver after the survivors' errors about it, and the
# coordinator's verdict comes as the job ends.
_SETTLE_S = 10.0


def gather(refs, slots, coordinator=None):
    """ray.get of one call per slot (`refs` and `slots` in rank order); the results in rank
    order. On failure, JobFailed naming every failed rank (a worker that died, or raised; those
    that raised hvrun's HorovodInternalError after the job was aborted for another come last)
    with the coordinator's verdict, once every call ended or _SETTLE_S passed."""
    import ray
    pending = dict(zip(refs, slots))
    failures = []
    settle_deadline = None
    while pending and (settle_deadline is None or time.monotonic() < settle_deadline):
        done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in done:
            slot = pending.pop(ref)
            try:
                ray.get(ref)
            except Exception as error:  # what the call raised, or how its worker ended
                failures.append(_outcome(slot, error))
                if settle_deadline is None:
                    settle_deadline = time.monotonic() + _SETTLE_S
    if failures:
        verdict = ""
        if coordinator is not None:
            coordinator.wait(max(0.0, settle_deadline - time.monotonic()))
            verdict = _verdict(coordinator.stderr_text())
        failures.sort(key=lambda o: (o.collateral, o.rank))
        raise JobFailed(ENGINE, failures, verdict)
    return ray.get(refs)


def _outcome(slot, error):
    import ray.exceptions as rex
    from hvrun.exceptions import HorovodInternalError
    where = "(pid %s on Ray node %s)" % (slot.pid, slot.node_id[:12])
    if isinstance(error, rex.RayActorError):
        return RankOutcome(slot.rank, slot.host, False,
                           cause="its worker process %s died: %s" % (where, _short(error)))
    inner = getattr(error, "cause", None) if isinstance(error, rex.RayTaskError) else error
    inner = error if inner is None else inner
    return RankOutcome(slot.rank, slot.host, False,
                       cause="%s: %s %s" % (type(inner).__name__, _short(inner), where),
                       collateral=isinstance(inner, HorovodInternalError))


def _verdict(stderr_text):
    ended = [line for line in stderr_text.splitlines() if "job ended:" in line]
    return ended[-1] if ended else ""


def _short(error, limit=600):
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + " ..."

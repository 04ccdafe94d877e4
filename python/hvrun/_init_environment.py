"""Horovod's variables that a trainer sets in os.environ itself, before init().

Horovod reads them at init(), so `os.environ["HOROVOD_TIMELINE"] = path` in the script works
there. hvrun's worker library reads its own settings at init() too, from the same environment;
but the coordinator's settings were read when hvrun started it, from the launcher's environment.
(A process started without a launcher starts its coordinator at init(), from the environment
of that moment: there everything the trainer set applies already.) Under a launcher, init()
therefore looks at what the trainer changed since the process started: the timeline
(HOROVOD_TIMELINE, HVRUN_TIMELINE_FILENAME) is started at run time by rank 0, as Horovod's rank 0
writes it; any other coordinator setting changed this late is reported in a warning saying where
to set it (the value cannot reach the running coordinator), never dropped silently.
"""
import os
import warnings

# Horovod's name (and hvrun's) of each setting the coordinator reads when it starts, with the
# hvrun flag that sets it (docs/settings.md).
_COORDINATOR_SETTINGS = {
    "HOROVOD_FUSION_THRESHOLD": "--fusion-threshold-mb",
    "HVRUN_FUSION_THRESHOLD": "--fusion-threshold-mb",
    "HOROVOD_CYCLE_TIME": "--cycle-time-ms", "HVRUN_CYCLE_TIME": "--cycle-time-ms",
    "HOROVOD_CACHE_CAPACITY": "--cache-capacity", "HVRUN_CACHE_CAPACITY": "--cache-capacity",
    "HOROVOD_STALL_CHECK_DISABLE": "--stall-check", "HVRUN_STALL_CHECK": "--stall-check",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "--stall-check-warning-time-seconds",
    "HVRUN_STALL_CHECK_TIME_SECONDS": "--stall-check-warning-time-seconds",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "--stall-check-shutdown-time-seconds",
    "HVRUN_STALL_SHUTDOWN_TIME_SECONDS": "--stall-check-shutdown-time-seconds",
    "HOROVOD_START_TIMEOUT": "--start-timeout", "HVRUN_START_TIMEOUT": "--start-timeout",
}
_TIMELINE_VARIABLES = ("HVRUN_TIMELINE_FILENAME", "HOROVOD_TIMELINE")


def _environment_at_start():
    """The environment this process was started with (what the launcher gave it)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return None  # no /proc: nothing can be told apart, so nothing is done
    start = {}
    for entry in entries:
        key, sep, value = entry.partition(b"=")
        if sep:
            start[os.fsdecode(key)] = os.fsdecode(value)
    return start


def set_by_trainer(names, start=None):
    """{name: value} of the variables in `names` whose value in os.environ differs from the
    one the process started with (set, or changed, by the trainer)."""
    start = _environment_at_start() if start is None else start
    if start is None:
        return {}
    return {name: os.environ[name] for name in names
            if name in os.environ and os.environ[name] != start.get(name)}


def apply(worker):
    """init(): starts the timeline a trainer asked for (rank 0), warns about coordinator
    settings it set too late. Returns the timeline path started, or None."""
    start = _environment_at_start()
    if start is None or "HVRUN_COORDINATOR_ADDR" not in start:
        # No launcher: init() started the coordinator itself, from this environment, so it
        # already has every value the trainer set.
        return None
    late = set_by_trainer(_COORDINATOR_SETTINGS, start)
    if late and worker.rank == 0:
        warnings.warn(
            "hvrun: %s set in the trainer after the job started; hvrun's coordinator read its "
            "settings when hvrun started it, so this value is not used: set it in the launcher's "
            "environment or pass %s to hvrun" % (
                ", ".join("%s=%s" % kv for kv in sorted(late.items())),
                ", ".join(sorted({_COORDINATOR_SETTINGS[k] for k in late}))),
            RuntimeWarning, stacklevel=3)
    timeline = set_by_trainer(_TIMELINE_VARIABLES, start)
    path = next((timeline[name] for name in _TIMELINE_VARIABLES if timeline.get(name)), None)
    # Horovod's DYNAMIC: no file yet, start_timeline() comes later.
    if path is None or path.upper() == "DYNAMIC" or worker.rank != 0:
        return None
    from hvrun.exceptions import raise_for_status
    code, message = worker.start_timeline(path)
    raise_for_status(code, message, "init: starting the timeline %s asked for" % path)
    return path

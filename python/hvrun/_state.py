"""This process's connection to the job: the worker, created by init(), ended by shutdown().

One worker per process, as in Horovod (the module-level state is the process's, not a job's:
a job is the set of processes hvrun started). init() after shutdown() registers again: every
rank of the job must do the same (test suites do it per test case).
"""
import atexit
import itertools
import threading

from hvrun import _core
from hvrun.exceptions import HvrunError, STATUS_NAMES

_lock = threading.Lock()
_worker = None
_op_timeout_s = 300.0
_counters = {}


def init():
    """Joins the job hvrun started (HVRUN_* environment). Idempotent while initialized."""
    global _worker, _op_timeout_s
    with _lock:
        if _worker is not None:
            return
        worker, code, message = _core.Worker.init()
        if worker is None:
            raise HvrunError("hvrun init failed: " + message, STATUS_NAMES.get(code, str(code)))
        _worker = worker
        _op_timeout_s = _core.op_timeout_s()
        _counters.clear()


def shutdown():
    """Leaves the job: pending collectives fail, the coordinator hears Goodbye."""
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.shutdown()


def is_initialized():
    return _worker is not None


def worker():
    """The worker; ValueError (as Horovod raises) when init() was not called."""
    w = _worker
    if w is None:
        raise ValueError("hvrun has not been initialized; use hvd.init().")
    return w


def op_timeout_s():
    return _op_timeout_s


def next_name(kind):
    """'<kind>.noname.<n>': every rank calls in the same order, so every rank makes the same name."""
    with _lock:
        counter = _counters.setdefault(kind, itertools.count())
        return "%s.noname.%d" % (kind, next(counter))


def op_name(kind, name):
    """Prefixes a user's name with the operation, as Horovod does ('allreduce.w')."""
    return next_name(kind) if name is None else "%s.%s" % (kind, name)


atexit.register(shutdown)

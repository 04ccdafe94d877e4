"""This process's connection to the job: the worker, created by init(), ended by shutdown().

One worker per process, as in Horovod (the module-level state is the process's, not a job's:
a job is the set of processes hvrun started). init() after shutdown() registers again: every
rank of the job must do the same (test suites do it per test case).

A hot spare (hvrun --spares) is not given a worker by its first init(): it gets a stand-in with
the identity it will likely have (see _ParkedSpare) and runs the trainer's start-up (model,
optimizer, data) while the job trains. hvrun.elastic.run registers it for real, where it waits
for a place: when a rank is lost, the spare's start-up is already done.
"""
import atexit
import itertools
import os
import sys
import threading
import traceback

from hvrun import _core
from hvrun.exceptions import STATUS_NAMES, HvrunError, TensorNameError

_lock = threading.Lock()
_worker = None
_error_before_init = None  # sys.last_exc/last_value when init() ran: it ends nothing of ours
_op_timeout_s = 300.0
_counters = {}
_listeners = []  # called with the worker after init(), with None before it ends


def add_worker_listener(listener):
    """Calls listener(worker) after every init() (at once when initialized now) and
    listener(None) before shutdown() ends that worker: for native extensions that reach the
    same worker through its address (the TensorFlow op library)."""
    with _lock:
        _listeners.append(listener)
        current = _worker
    if current is not None:
        listener(current)


def _tell_listeners(worker):
    for listener in list(_listeners):
        listener(worker)


_PARKED_MESSAGE = (
    "this process is a hot spare (hvrun --spares), parked until a rank is lost: it joins the "
    "job in hvd.elastic.run, and until then it has no rank and takes part in no collective. "
    "Call collectives inside the function hvd.elastic.run wraps (its state.sync() gives a "
    "spare the model and optimizer state)")


class _ParkedSpare:
    """A hot spare's stand-in for the worker until hvrun.elastic.run registers it. rank() and
    size() answer what the spare will likely be given, so start-up code that reads them (a
    learning rate scaled by size(), "rank 0 writes the logs") behaves as it will after the
    reset: the job's size at launch, and its last rank (a spare joins after the survivors;
    never rank 0 of a job with two ranks or more). local_rank() is its own slot's on its
    host, so a GPU chosen by local rank is one no rank uses. Anything else (a collective, a
    process set) raises: the spare is in no membership yet."""

    def __init__(self, environ):
        def number(key, default):
            try:
                return int(environ.get(key, default))
            except ValueError:
                return default
        self.size = max(number("HVRUN_SIZE", 1), 1)
        self.rank = self.size - 1
        self.local_rank = max(number("HVRUN_LOCAL_RANK", 0), 0)
        self.local_size = max(number("HVRUN_LOCAL_SIZE", 1), self.local_rank + 1)
        self.cross_rank = max(number("HVRUN_CROSS_RANK", 0), 0)
        self.cross_size = max(number("HVRUN_CROSS_SIZE", 1), self.cross_rank + 1)

    def hosts_updated(self):
        return False

    def shutdown(self):
        pass  # it never registered: nobody waits for its goodbye

    def shutdown_with_failure(self, reason):
        pass  # the launcher reports the spare's exit (and its output) itself

    def __getattr__(self, name):
        raise HvrunError("hvrun: %s (called: %s)" % (_PARKED_MESSAGE, name),
                         "FAILED_PRECONDITION")


_spare_parked = False  # this process's first init() gave it a _ParkedSpare


def in_elastic_job():
    """True in a job hvrun started elastic (HVRUN_ELASTIC=1)."""
    return os.environ.get("HVRUN_ELASTIC", "0").strip().lower() in ("1", "true", "yes", "on")


def is_spare_process():
    """True in a process hvrun started as a hot spare (HVRUN_ELASTIC_SPARE=1), placed or not."""
    return os.environ.get("HVRUN_ELASTIC_SPARE") == "1"


def is_parked_spare():
    """True while this process is a hot spare that init() parked (see _ParkedSpare)."""
    return isinstance(_worker, _ParkedSpare)


def init():
    """Joins the job hvrun started (HVRUN_* environment); started without a launcher, a job of
    size 1 with a coordinator of its own. Idempotent while initialized. A hot spare's first
    init() parks it without registering (see _ParkedSpare); its next one registers and waits
    for a place."""
    global _worker, _op_timeout_s, _error_before_init, _spare_parked
    with _lock:
        if _worker is not None:
            return
        if not _spare_parked and is_spare_process() and in_elastic_job():
            _spare_parked = True
            _worker = _ParkedSpare(os.environ)
            return
        _error_before_init = _last_error()
        worker, code, message = _core.Worker.init()
        if worker is None:
            raise HvrunError("hvrun init failed: " + message, STATUS_NAMES.get(code, str(code)))
        _worker = worker
        _op_timeout_s = _core.op_timeout_s()
        _counters.clear()
    _tell_listeners(worker)
    from hvrun import _init_environment
    _init_environment.apply(worker)


def shutdown():
    """Leaves the job: pending collectives fail, the coordinator hears Goodbye."""
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        if not isinstance(worker, _ParkedSpare):
            _tell_listeners(None)
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


def next_name(kind, process_set_id=0):
    """'<kind>.noname.<n>': every rank calls in the same order, so every rank makes the same name.
    A process set counts its own ('<kind>.ps<id>.noname.<n>'): only its members call it."""
    if process_set_id:
        kind = "%s.ps%d" % (kind, process_set_id)
    with _lock:
        counter = _counters.setdefault(kind, itertools.count())
        return "%s.noname.%d" % (kind, next(counter))


def op_name(kind, name, process_set_id=0):
    """Prefixes a user's name with the operation, as Horovod does ('allreduce.w').

    Bytes are refused rather than formatted ("b'w'" would silently be another name); the
    library checks the resulting str (UTF-8 text without NUL) as it converts it."""
    if name is None:
        return next_name(kind, process_set_id)
    if isinstance(name, (bytes, bytearray, memoryview)):
        rank = _worker.rank if _worker is not None else "?"
        raise TensorNameError(
            "rank %s: collective refused: a tensor name is a str, not %s (%r); decode it "
            "first (names are UTF-8 text)" % (rank, type(name).__name__, bytes(name)[:200]))
    return "%s.%s" % (kind, name)


def _last_error():
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


def _uncaught_exception():
    """The exception ending the interpreter, as text, or None.

    Python stores an uncaught exception in sys.last_exc / sys.last_value before it runs the
    atexit handlers; a clean exit, sys.exit() and os._exit() leave none. An interactive session
    keeps the last error it printed, which ends nothing, so it does not count; nor does an error
    that was already there at init() (a notebook's, or one an extension printed and handled)."""
    if hasattr(sys, "ps1"):
        return None
    exc = _last_error()
    if exc is None or exc is _error_before_init or isinstance(exc, SystemExit):
        return None
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if frames:
        last = frames[-1]
        text += " (raised at %s:%d in %s)" % (last.filename, last.lineno, last.name)
    if len(text) > _MAX_FAILURE_TEXT:
        text = text[:_MAX_FAILURE_TEXT] + "..."
    # The reason crosses into C++ as UTF-8: a surrogate (a file name, say) is shown escaped.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_MAX_FAILURE_TEXT = 2000


def _shutdown_at_exit():
    """atexit: leaves the job; a rank ending with an uncaught exception reports a failure
    carrying its text (the coordinator aborts the job naming this rank) instead of Goodbye."""
    global _worker
    failure = _uncaught_exception()
    with _lock:
        worker, _worker = _worker, None
    if worker is None:
        return
    if not isinstance(worker, _ParkedSpare):
        _tell_listeners(None)
    if failure is None:
        worker.shutdown()
    else:
        worker.shutdown_with_failure("uncaught Python exception: " + failure)


atexit.register(_shutdown_at_exit)

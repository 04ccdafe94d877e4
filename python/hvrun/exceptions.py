"""Exceptions raised by hvrun's Python packages.

Every failed collective raises :class:`HorovodInternalError` (a ``RuntimeError``, as in
Horovod): a peer that died or stopped, a job abort, tensors whose metadata differ between ranks,
a data-plane failure, a wait that ran out. The message is the worker library's: it names the
tensor, the ranks and what each sent, or the rank and host that failed. ``code`` carries the
library's status code name ("ABORTED", "INVALID_ARGUMENT", ...).
"""

# hvrun's StatusCode values (common/status.h) and their names.
STATUS_NAMES = {
    0: "OK", 1: "CANCELLED", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED",
    12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}


class HvrunError(RuntimeError):
    """Base class of hvrun's errors; ``code`` is the status code's name."""

    def __init__(self, message, code="INTERNAL"):
        super().__init__(message)
        self.code = code


class HorovodInternalError(HvrunError):
    """A collective failed (peer lost, job aborted, mismatched tensors, timeout)."""


class TensorNameError(HvrunError, ValueError):
    """A tensor name hvrun refuses, raised at submission (nothing is sent).

    Names are non-empty UTF-8 text without NUL characters, as in hvrun's C and C++ APIs: a
    ``str`` holding a lone surrogate, one with ``"\\0"``, or ``bytes`` are refused. A
    ``ValueError``, so code that checks arguments that way catches it; ``code`` is
    "INVALID_ARGUMENT"."""

    def __init__(self, message, code="INVALID_ARGUMENT"):
        super().__init__(message, code)


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts were added to an elastic job: raised by State.commit() / check_host_updates() on
    every rank at the same commit, so that hvrun.elastic.run / hvrun.torch.elastic.run re-form
    the job with the new workers. The state is kept (no restore); `skip_sync` True would skip
    the sync that follows the reset (hvrun raises it with False: newcomers need the state)."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


def raise_for_status(code, message, context=None):
    """Raises HorovodInternalError for a non-zero status code."""
    if code == 0:
        return
    text = message if context is None else "%s: %s" % (context, message)
    raise HorovodInternalError(text, STATUS_NAMES.get(code, str(code)))

"""The process that runs one rank's function: `python -m hvrun.cluster.rank_main FD PARENT`.

First it asks to be killed when its parent (pid PARENT, the engine's task) dies, and ends at once
if that has already happened. Then it reads (fn, args, kwargs) pickled on stdin, runs fn and writes its outcome, pickled, on file
descriptor FD: ("ok", pickled value) or ("error", text, collateral). A failure is then raised
again, so that the interpreter ends as an uncaught exception does: hvrun reports the failure to
the coordinator (which aborts the job naming this rank) and the traceback goes to stderr.
"""
import ctypes
import os
import pickle
import signal
import sys
import traceback

import cloudpickle


def _describe(exc):
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if frames:
        last = frames[-1]
        text += " (raised at %s:%d in %s)" % (last.filename, last.lineno, last.name)
    return text


def _collateral(exc):
    """The rank failed because the job was aborted for another's failure: a collective failed
    (HorovodInternalError), or init was refused because the job had already been aborted."""
    from hvrun.exceptions import HorovodInternalError, HvrunError
    return isinstance(exc, HorovodInternalError) or (
        isinstance(exc, HvrunError) and exc.code == "ABORTED")


_PR_SET_PDEATHSIG = 1


def _die_with(parent):
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request: nobody waits for this rank
        os._exit(1)


def main():
    result_fd = int(sys.argv[1])
    _die_with(int(sys.argv[2]))
    fn, args, kwargs = cloudpickle.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    try:
        record = ("ok", cloudpickle.dumps(fn(*args, **kwargs)))
        failure = None
    except BaseException as exc:  # noqa: B902 - KeyboardInterrupt and SystemExit are outcomes too
        record = ("error", _describe(exc), _collateral(exc))
        failure = exc
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(record, out)
    if failure is not None:
        raise failure


if __name__ == "__main__":
    main()

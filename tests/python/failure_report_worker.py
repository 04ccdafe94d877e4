"""Worker of test_failure_reports.py, run by every rank of a small hvrun job.

    raise-on-rank-1   rank 1 raises ValueError mid-loop and the interpreter ends with it; the
                      others report what their collective raised
    names             names that cannot be tensor names raise TensorNameError at submission,
                      in every API; the job goes on
    second-init       a second registration while the first worker lives fails at once
"""
import signal
import sys
import time

import numpy as np
import torch

import hvrun
import hvrun.torch as hvd
from hvrun import _core, _state

# hvrun stops the job when it fails (SIGTERM to every rank): the survivors keep running until
# they have printed what their collective raised.
signal.signal(signal.SIGTERM, lambda *_: None)


def raise_on_rank_1():
    hvd.init()
    for step in range(1000):
        if hvd.rank() == 1 and step == 3:
            raise ValueError("boom at step %d" % step)
        try:
            hvd.allreduce(torch.ones(4), name="grad.step%d" % step, op=hvd.Sum)
        except hvd.HorovodInternalError as e:
            print("CAUGHT at step %d: %s" % (step, e), flush=True)
            sys.exit(1)
    print("NO ERROR", flush=True)


def expect_name_error(what, call, *shows):
    try:
        call()
    except hvrun.TensorNameError as e:
        text = str(e)
        assert isinstance(e, ValueError) and isinstance(e, hvrun.HvrunError), what
        assert e.code == "INVALID_ARGUMENT", (what, e.code)
        assert "rank %d:" % hvd.rank() in text, (what, text)
        for piece in shows:
            assert piece in text, (what, piece, text)
        return
    except Exception as e:  # noqa: BLE001 - the wrong kind is the failure being tested
        raise AssertionError("%s raised %s: %s, not TensorNameError" % (what, type(e).__name__, e))
    raise AssertionError("%s raised nothing" % what)


def names():
    hvd.init()
    t = torch.ones(4)
    a = np.ones(4, np.float32)
    surrogate = "w\ud800"
    for what, call, shows in [
        ("torch bytes", lambda: hvd.allreduce(t, name=b"w"), ["not bytes", "b'w'"]),
        ("numpy bytes", lambda: hvrun.allreduce(a, name=b"w\xff"), ["not bytes"]),
        ("torch surrogate", lambda: hvd.allreduce(t, name=surrogate), ["\\ud800", "UTF-8"]),
        ("torch async surrogate", lambda: hvd.allreduce_async(t, name=surrogate), ["\\ud800"]),
        ("torch allgather NUL", lambda: hvd.allgather(t, name="a\0b"), ["NUL", "\\x00"]),
        ("torch broadcast", lambda: hvd.broadcast(t, 0, name=surrogate), ["\\ud800"]),
        ("torch grouped", lambda: hvd.grouped_allreduce([t, t.clone()], name=surrogate),
         ["\\ud800"]),
        ("numpy allgather", lambda: hvrun.allgather(a, name=surrogate), ["\\ud800"]),
        ("core surrogate", lambda: _state.worker().allreduce_async(
            surrogate, _core.TensorRef(a.ctypes.data, 7, [4]), _core.TensorRef(a.ctypes.data, 7, [4]), 1),
         ["\\ud800"]),
        ("core bytes", lambda: _state.worker().allgather_async(
            b"x", _core.TensorRef(a.ctypes.data, 7, [4])), ["not bytes"]),
    ]:
        expect_name_error(what, call, *shows)
    # Nothing reached the coordinator: the job's collectives go on, a non-ASCII name among them.
    out = hvd.allreduce(torch.ones(4), name="grad.\u00e9\u2211\U0001F600", op=hvd.Sum)
    assert torch.equal(out, torch.full((4,), float(hvd.size()))), out
    hvd.barrier()
    print("NAMES OK", flush=True)
    hvd.shutdown()


def second_init():
    hvd.init()
    hvd.init()  # hvrun.init() is idempotent while initialized, as Horovod's
    start = time.monotonic()
    worker, code, message = _core.Worker.init()
    took = time.monotonic() - start
    assert worker is None, "a second registration succeeded"
    assert code == 6, (code, message)  # ALREADY_EXISTS
    assert "rank %d" % hvd.rank() in message and "shutdown()" in message, message
    assert "init after shutdown" not in message, message
    assert took < 2.0, "took %.1f s" % took
    hvd.barrier()
    print("SECOND INIT REFUSED in %.2f s: %s" % (took, message), flush=True)
    hvd.shutdown()


{"raise-on-rank-1": raise_on_rank_1, "names": names, "second-init": second_init}[sys.argv[1]]()

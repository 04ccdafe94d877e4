"""Faults through hvrun.tensorflow's asynchronous kernels: a killed peer and a peer that never
submits both make the surviving rank raise within a bound (never a hang). Each case is its own
small hvrun job (these tests do not run under hvrun)."""
import os
import re
import sys
import time

import pytest

pytest.importorskip("tensorflow")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from test_faults import run_job  # noqa: E402  (hvrun in its own session, bounded)


def raised(out):
    found = re.search(r"\[0\]<stdout>:RAISED after ([0-9.]+) s: (\w+): (.*)", out)
    assert found, out
    return float(found.group(1)), found.group(2), found.group(3)


def test_killed_peer_raises_on_the_survivor():
    code, out = run_job(["-np", "2", "--grace-period", "20", sys.executable,
                         os.path.join(HERE, "fault_worker.py"), "killed"], timeout=120)
    assert "KILLING rank 1" in out, out
    seconds, error, message = raised(out)
    assert seconds < 10.0, out          # promptly, not after the operation timeout
    assert "rank 1" in message, out     # names the rank that died
    assert error in ("AbortedError", "UnavailableError", "InternalError"), out
    assert code != 0, out               # the job failed: rank 1 was killed


def test_collective_a_peer_never_submits_fails_after_the_op_timeout():
    start = time.monotonic()
    code, out = run_job(["-np", "2", "--op-timeout", "3", sys.executable,
                         os.path.join(HERE, "fault_worker.py"), "skipped"], timeout=120)
    seconds, error, message = raised(out)
    assert error == "DeadlineExceededError" and "did not complete within 3.0 s" in message, out
    assert 2.5 < seconds < 20.0, out
    assert "rank 0" in message and "after_skipped" in message, out
    assert time.monotonic() - start < 100, out


def test_one_name_with_two_ops_raises_on_both_ranks_within_seconds():
    # Eager calls: TensorFlow names each kernel after its op type, so the binding must pass the
    # user's name for the coordinator to see one name used for two ops. --op-timeout is long:
    # the mismatch (after its 2 s grace), not a timeout, must end the wait.
    code, out = run_job(["-np", "2", "--op-timeout", "120", sys.executable,
                         os.path.join(HERE, "name_two_ops_worker.py")], timeout=90)
    for rank in (0, 1):
        found = re.search(r"\[%d\]<stdout>:RAISED after ([0-9.]+) s: (\w+): (.*)" % rank, out)
        assert found, out
        assert float(found.group(1)) < 10.0, out
        assert found.group(2) == "FailedPreconditionError", out
        for piece in ("the name 'm' was used for different collectives",
                      "rank 0 submitted allreduce 'allreduce.m'",
                      "rank 1 submitted allgather 'allgather.m'"):
            assert piece in found.group(3), out
    assert out.count("NEXT STEP OK") == 2, out
    assert code == 0, out

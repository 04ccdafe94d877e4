"""Shared set-up for the suites every rank of an hvrun job runs (same tests, same order).

The session joins the job once; a test that needs a fresh job (init -> shutdown -> init) does
it itself and leaves the process initialized.
"""
import os
import signal
import subprocess

import pytest


@pytest.fixture(scope="session", autouse=True)
def hvrun_job():
    if "HVRUN_COORDINATOR_ADDR" not in os.environ:
        yield None  # a suite that starts its own jobs (test_faults.py)
        return
    import hvrun.torch as hvd
    hvd.init()
    yield hvd
    hvd.shutdown()


def data(rank, shape, dtype, seed=0):
    """The tensor rank `rank` contributes: small integers, exact in every dtype."""
    import numpy as np
    rng = np.random.default_rng(1000 * seed + rank)
    return rng.integers(1, 5, size=shape).astype(dtype)


def run_job(args, timeout):
    """Runs `hvrun args` (HVRUN_BIN_DIR's) in its own session; kills the whole group when it
    overstays. Returns (exit code, output)."""
    hvrun = os.path.join(os.environ["HVRUN_BIN_DIR"], "hvrun")
    proc = subprocess.Popen([hvrun] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError("hvrun job did not finish within %d s:\n%s" % (timeout, out))
    return proc.returncode, out

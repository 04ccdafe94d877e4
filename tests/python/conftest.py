"""Shared set-up for the suites every rank of an hvrun job runs (same tests, same order).

The session joins the job once; a test that needs a fresh job (init -> shutdown -> init) does
it itself and leaves the process initialized.
"""
import os

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

"""Set-up for the hvrun.tensorflow suites: every rank of an hvrun job runs the same tests in the
same order. Without TensorFlow they skip, saying so; with it, hvrun.tensorflow must load."""
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

try:
    import tensorflow  # noqa: F401
except ImportError as e:
    TENSORFLOW_MISSING = "TensorFlow is not installed in this Python environment (%s)" % e
else:
    TENSORFLOW_MISSING = None


def pytest_collection_modifyitems(config, items):
    if TENSORFLOW_MISSING:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=TENSORFLOW_MISSING))


@pytest.fixture(scope="session", autouse=True)
def hvrun_job():
    """Replaces the parent folder's fixture: the job joined through hvrun.tensorflow."""
    if TENSORFLOW_MISSING or "HVRUN_COORDINATOR_ADDR" not in os.environ:
        yield None
        return
    import hvrun.tensorflow as hvd
    hvd.init()
    yield hvd
    hvd.shutdown()

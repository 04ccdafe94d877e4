"""hvrun.tensorflow under another TensorFlow than the one its op library was built against: an
ImportError that names both versions, before the library is loaded."""
import subprocess
import sys

import pytest


def test_another_tensorflow_is_refused_naming_both_versions():
    pytest.importorskip("tensorflow")
    try:
        from hvrun.tensorflow._ops_build import TENSORFLOW_VERSION
    except ImportError:
        pytest.skip("hvrun.tensorflow's op library was not built")
    code = ("import tensorflow as tf\n"
            "tf.__version__ = '2.99.0'\n"
            "import hvrun.tensorflow\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, "hvrun.tensorflow imported under another TensorFlow"
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: hvrun.tensorflow:"), out.stderr
    assert "built against TensorFlow %s" % TENSORFLOW_VERSION in last, last
    assert "TensorFlow 2.99.0 is installed" in last, last

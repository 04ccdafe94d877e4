"""hvrun.torch under another PyTorch than the one its C++ tensor module was built against (a
wheel installed beside any PyTorch 2.x): the module is not even loaded, and the calls read
tensors through Python. Run in a fresh interpreter each, since the choice is made at import."""
import subprocess
import sys

import pytest
import torch

from hvrun.torch import handles


def _import_under(version):
    code = ("import sys, torch\n"
            "torch.__version__ = %r\n"
            "from hvrun.torch import handles\n"
            "print(handles._api is None, handles._table.tensor_api_active,\n"
            "      'hvrun.torch._tensor_api' in sys.modules)\n" % version)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_another_torch_never_loads_the_tensor_module():
    assert _import_under("2.0.1") == ["True", "False", "False"]


def test_the_torch_it_was_built_for_uses_the_tensor_module():
    try:
        from hvrun.torch._tensor_api_build import TORCH_VERSION
    except ImportError:
        pytest.skip("hvrun.torch._tensor_api was not built (no torch C++ headers at configure "
                    "time, or HVRUN_WITH_TORCH_API=OFF)")
    assert TORCH_VERSION == torch.__version__
    assert handles._table.tensor_api_active
    assert _import_under(torch.__version__) == ["False", "True", "True"]

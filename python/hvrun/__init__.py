"""hvrun for Python: the worker library's collectives on NumPy arrays.

    import numpy as np, hvrun
    hvrun.init()                                   # under `hvrun -np N python3 train.py`
    total = hvrun.allreduce(np.ones(4, np.float32), op=hvrun.Sum)
    hvrun.shutdown()

PyTorch users: `import hvrun.torch as hvd`, Horovod's API (horovod.torch) on hvrun.
"""
import os as _os
import sys as _sys


def _load_core():
    """Imports the extension so that libhvrun binds to the gRPC and protobuf it was built with.

    TensorFlow puts its own copies of gRPC's C functions in the process's global scope
    (libtensorflow_cc is loaded RTLD_GLOBAL); a library loaded after it would call those, a
    different gRPC, and crash. RTLD_DEEPBIND makes libhvrun and the libraries it brings look in
    their own dependencies first, whichever framework came before."""
    flags = _sys.getdlopenflags()
    _sys.setdlopenflags(flags | getattr(_os, "RTLD_DEEPBIND", 0))
    try:
        from hvrun import _core as core
    finally:
        _sys.setdlopenflags(flags)
    return core


_core = _load_core()
from hvrun import _autopsy

_autopsy.register(_core)  # Python stacks in autopsies (hvrun/_autopsy.py)
from hvrun._state import init, is_initialized, shutdown, worker as _worker
from hvrun._tensors import Adasum, Average, Max, Min, Product, Sum
from hvrun.exceptions import (HorovodInternalError, HostsUpdatedInterrupt, HvrunError,
                              TensorNameError)
from hvrun.numpy_ops import (Handle, allgather, allgather_async, allreduce, allreduce_,
                             allreduce_async, allreduce_async_, alltoall, barrier, broadcast,
                             broadcast_, broadcast_async_, join, reducescatter)

__version__ = _core.version()


def _installed_cmake_prefix():
    """Where an installed hvrun keeps its CMake package (None in a build tree)."""
    import os
    try:
        from hvrun._install_layout import CMAKE_PREFIX_FROM_PACKAGE
    except ImportError:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(__file__), CMAKE_PREFIX_FROM_PACKAGE))


# For C++ trainers built against this installation, as torch.utils.cmake_prefix_path:
#   cmake -DCMAKE_PREFIX_PATH="$(python -c 'import hvrun; print(hvrun.cmake_prefix_path)')" ...
cmake_prefix_path = _installed_cmake_prefix()


def rank():
    return _worker().rank


def size():
    return _worker().size


def local_rank():
    return _worker().local_rank


def local_size():
    return _worker().local_size


def cross_rank():
    return _worker().cross_rank


def cross_size():
    return _worker().cross_size


def job_id():
    return _worker().job_id


def abort(reason):
    """Aborts the whole job: every rank's pending and later collectives raise with `reason`."""
    _worker().abort(reason)


def mark_step():
    """One training step done on this rank (step rate in /metrics and hvrun's summary)."""
    _worker().mark_step()


def mark_phase(name):
    """Phase `name` of this step starts now on this rank ("data", "forward", "backward", ...),
    ending the one before; "" ends it, and mark_step() ends the last. When one rank holds the
    others back, /metrics and hvrun's summary say which of its phases grew."""
    _worker().mark_phase(str(name))


def start_timeline(file_path, mark_cycles=False):
    """The coordinator starts writing the job's timeline (Chrome trace JSON) to `file_path`.

    Call it on any one rank; `mark_cycles` is accepted for Horovod compatibility (hvrun always
    marks plans)."""
    del mark_cycles
    from hvrun.exceptions import raise_for_status
    code, message = _worker().start_timeline(str(file_path))
    raise_for_status(code, message, "start_timeline")


def stop_timeline():
    """Stops the job's timeline and closes its file (valid JSON)."""
    from hvrun.exceptions import raise_for_status
    code, message = _worker().stop_timeline()
    raise_for_status(code, message, "stop_timeline")


__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "job_id", "abort", "mark_step", "mark_phase", "start_timeline", "stop_timeline",
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "HvrunError", "HorovodInternalError", "HostsUpdatedInterrupt", "TensorNameError",
    "Handle", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "allgather",
    "allgather_async", "broadcast", "broadcast_", "broadcast_async_", "alltoall",
    "reducescatter", "barrier", "join",
]

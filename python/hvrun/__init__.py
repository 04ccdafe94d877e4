"""hvrun for Python: the worker library's collectives on NumPy arrays.

    import numpy as np, hvrun
    hvrun.init()                                   # under `hvrun -np N python3 train.py`
    total = hvrun.allreduce(np.ones(4, np.float32), op=hvrun.Sum)
    hvrun.shutdown()

PyTorch users: `import hvrun.torch as hvd`, Horovod's API (horovod.torch) on hvrun.
"""
from hvrun import _core
from hvrun._state import init, is_initialized, shutdown, worker as _worker
from hvrun._tensors import Adasum, Average, Max, Min, Product, Sum
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt, HvrunError
from hvrun.numpy_ops import (Handle, allgather, allgather_async, allreduce, allreduce_,
                             allreduce_async, allreduce_async_, alltoall, barrier, broadcast,
                             broadcast_, broadcast_async_, join, reducescatter)

__version__ = _core.version()


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


__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "job_id", "abort",
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "HvrunError", "HorovodInternalError", "HostsUpdatedInterrupt",
    "Handle", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "allgather",
    "allgather_async", "broadcast", "broadcast_", "broadcast_async_", "alltoall",
    "reducescatter", "barrier", "join",
]

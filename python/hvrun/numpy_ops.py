"""Collectives on NumPy arrays (the plain `hvrun` package).

Arrays must be C-contiguous with a dtype hvrun reduces (uint8, int8, int16, int32, int64, float16,
float32, float64); inputs stay untouched, results are new arrays (the `_` variants work in
place). Every rank calls the same collectives with matching arrays; a mismatch or a failed peer
raises HorovodInternalError on every rank.
"""
import numpy as np

from hvrun import _core, _state
from hvrun._tensors import NUMPY_DTYPES, Average, Sum, core_op
from hvrun.exceptions import raise_for_status


def _ref(array):
    if not isinstance(array, np.ndarray):
        raise TypeError("expected a numpy.ndarray, got %s" % type(array).__name__)
    if not array.flags.c_contiguous:
        raise ValueError("array must be C-contiguous (use numpy.ascontiguousarray)")
    code = NUMPY_DTYPES.get(array.dtype)
    if code is None:
        raise TypeError("dtype %s is not supported by hvrun" % array.dtype)
    return _core.TensorRef(array.__array_interface__["data"][0], code, list(array.shape))


def _wait(handle):
    code, message = handle.wait(_state.op_timeout_s())
    raise_for_status(code, message)
    return handle


class Handle:
    """An asynchronous collective; wait() returns its result (or raises)."""

    def __init__(self, core_handle, finish, keep_alive):
        self._handle = core_handle
        self._finish = finish
        self._keep_alive = keep_alive  # the arrays the library reads or writes until completion

    def poll(self):
        return self._handle.poll()

    def wait(self):
        _wait(self._handle)
        self._keep_alive = None
        return self._finish(self._handle)


def allreduce_async_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    ref = _ref(array)
    h = _state.worker().allreduce_async(_state.op_name("allreduce", name), ref, ref, core_op(op),
                                        prescale_factor, postscale_factor)
    return Handle(h, lambda _: array, array)


def allreduce_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    # Blocking in the library: a named, already negotiated array may take the fast path.
    ref = _ref(array)
    h = _state.worker().allreduce_now_or_async(_state.op_name("allreduce", name), ref, ref,
                                               core_op(op), prescale_factor, postscale_factor)
    _wait(h)
    return array


def allreduce_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    out = np.empty_like(array)
    h = _state.worker().allreduce_async(_state.op_name("allreduce", name), _ref(array), _ref(out),
                                        core_op(op), prescale_factor, postscale_factor)
    return Handle(h, lambda _: out, (array, out))


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    out = np.empty_like(array)
    h = _state.worker().allreduce_now_or_async(_state.op_name("allreduce", name), _ref(array),
                                               _ref(out), core_op(op), prescale_factor,
                                               postscale_factor)
    _wait(h)
    return out


def allgather_async(array, name=None):
    h = _state.worker().allgather_async(_state.op_name("allgather", name), _ref(array))
    return Handle(h, lambda done: done.output(), array)


def allgather(array, name=None):
    """Concatenates every rank's array along axis 0 (which may differ per rank)."""
    return allgather_async(array, name).wait()


def broadcast_async_(array, root_rank, name=None):
    h = _state.worker().broadcast_async(_state.op_name("broadcast", name), _ref(array), root_rank)
    return Handle(h, lambda _: array, array)


def broadcast_(array, root_rank, name=None):
    return broadcast_async_(array, root_rank, name).wait()


def broadcast(array, root_rank, name=None):
    return broadcast_(np.array(array, copy=True, order="C"), root_rank, name)


def alltoall(array, splits=None, name=None):
    """Sends splits[r] rows to rank r; returns (received array, received splits)."""
    splits = [] if splits is None else [int(s) for s in splits]
    h = _state.worker().alltoall_async(_state.op_name("alltoall", name), _ref(array), splits)
    _wait(h)
    return h.output(), np.asarray(h.received_splits(), dtype=np.int32)


def reducescatter(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces across ranks; rank r gets its block of axis 0 (dim0/size rows, +1 for r < dim0 % size)."""
    h = _state.worker().reducescatter_async(_state.op_name("reducescatter", name), _ref(array),
                                            core_op(op), prescale_factor, postscale_factor)
    _wait(h)
    return h.output()


def barrier():
    _wait(_state.worker().barrier_async())


def join():
    """Blocks until every rank joined; returns the last rank to join."""
    return _wait(_state.worker().join_async()).join_result()


__all__ = ["Handle", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
           "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async_",
           "alltoall", "reducescatter", "barrier", "join", "Average", "Sum"]

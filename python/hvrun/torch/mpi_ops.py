"""Horovod's collective operations on torch tensors (horovod.torch.mpi_ops), on hvrun.

Same names, arguments and defaults as horovod.torch. Handles are integers; poll(handle) and
synchronize(handle) take them. Every rank submits the same operations (names are made from a
per-process counter when none is given, so unnamed calls must come in the same order on every
rank, as in Horovod). A failed operation raises HorovodInternalError on synchronize: a peer
that died, an abort, metadata that differs between ranks (named in the message), a timeout.

CPU tensors and CUDA tensors: a CUDA tensor is handed to the worker library with its device and
torch's current stream on that device; results are ready on that stream when synchronize returns.
Tensors are passed without copies when contiguous (a non-contiguous tensor is copied, and for
the in-place variants copied back).
"""
import itertools
import threading

import numpy as np
import torch

from hvrun import _core, _state
from hvrun._tensors import (BFLOAT16, FLOAT16, FLOAT32, FLOAT64, INT8, INT32, INT64, UINT8,
                            Adasum, Average, Max, Min, Product, Sum, core_op, resolve_op)
from hvrun.exceptions import HorovodInternalError, raise_for_status
from hvrun.process_sets import (ProcessSet, _check_process_set, add_process_set,  # noqa: F401
                                global_process_set, remove_process_set)
from hvrun.torch.compression import Compression

_TORCH_DTYPES = {
    torch.uint8: UINT8, torch.int8: INT8, torch.int32: INT32, torch.int64: INT64,
    torch.float16: FLOAT16, torch.bfloat16: BFLOAT16, torch.float32: FLOAT32,
    torch.float64: FLOAT64,
}
# Dtypes the operations that only move bytes (broadcast, allgather, alltoall) carry as another
# dtype of the same width.
_MOVED_AS = {torch.bool: torch.uint8}


# ---- tensors <-> the extension

def _ref(tensor, moving_bytes=False):
    """A zero-copy TensorRef of a contiguous tensor (CUDA: its device and current stream)."""
    dtype = tensor.dtype
    if moving_bytes and dtype in _MOVED_AS:
        tensor = tensor.view(_MOVED_AS[dtype])
        dtype = tensor.dtype
    code = _TORCH_DTYPES.get(dtype)
    if code is None:
        raise TypeError("hvrun does not support tensors of dtype %s (supported: uint8, int8, "
                        "int32, int64, float16, bfloat16, float32, float64)" % (tensor.dtype,))
    device, stream = -1, 0
    if tensor.is_cuda:
        device = tensor.device.index
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
    return _core.TensorRef(tensor.data_ptr(), code, list(tensor.shape), device, stream)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _from_output(output, like):
    """The library's result buffer as a tensor of `like`'s dtype and device, without a copy."""
    if isinstance(output, np.ndarray):
        result = torch.from_numpy(output)  # the array keeps the handle, and its bytes, alive
    else:
        result = torch.as_tensor(output, device=like.device)  # __cuda_array_interface__
    if like.dtype in (torch.bfloat16, torch.bool) and result.dtype != like.dtype:
        result = result.view(like.dtype)
    return result


# ---- handles: integers, as Horovod's

class _Pending:
    __slots__ = ("handles", "finish", "keep_alive")

    def __init__(self, handles, finish, keep_alive):
        self.handles = handles
        self.finish = finish
        self.keep_alive = keep_alive  # tensors the library reads or writes until completion


_handle_map = {}
_handle_lock = threading.Lock()
_handle_ids = itertools.count(1)


def _register(handles, finish, keep_alive):
    with _handle_lock:
        handle = next(_handle_ids)
        _handle_map[handle] = _Pending(handles, finish, keep_alive)
    return handle


def poll(handle):
    """True when the asynchronous operation `handle` finished (successfully or not)."""
    with _handle_lock:
        pending = _handle_map.get(handle)
    if pending is None:
        raise ValueError("handle %r was not created or has been synchronized already" % (handle,))
    return all(h.poll() for h in pending.handles)


def synchronize(handle):
    """Waits for `handle` and returns its result; raises HorovodInternalError when it failed."""
    with _handle_lock:
        pending = _handle_map.pop(handle, None)
    if pending is None:
        return None
    timeout = _state.op_timeout_s()
    for h in pending.handles:
        code, message = h.wait(timeout)
        raise_for_status(code, message)
    return pending.finish(pending.handles)


def _worker():
    return _state.worker()


# ---- allreduce

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an out-of-place allreduce; synchronize(handle) returns the reduced tensor."""
    op = resolve_op(op, average)
    _check_process_set(process_set)
    source = _contiguous(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    h = _worker().allreduce_async(_state.op_name("allreduce", name), _ref(source), _ref(output),
                                  core_op(op), prescale_factor, postscale_factor)
    return _register([h], lambda _: output, (source, output))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; synchronize(handle) returns `tensor`, reduced."""
    op = resolve_op(op, average)
    _check_process_set(process_set)
    work = _contiguous(tensor)
    h = _worker().allreduce_async(_state.op_name("allreduce", name), _ref(work), _ref(work),
                                  core_op(op), prescale_factor, postscale_factor)

    def finish(_):
        if work is not tensor:
            tensor.copy_(work)
        return tensor

    return _register([h], finish, work)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient (same op and scaling)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(grad_output, average=average, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over every rank (default op: Average) into a new tensor."""
    compressed, ctx = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                     postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place and returns it."""
    if tensor.is_cuda:
        return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                            postscale_factor, process_set))
    # CPU: blocking in the library, so a named, already negotiated tensor may take the fast path.
    op = resolve_op(op, average)
    _check_process_set(process_set)
    work = _contiguous(tensor)
    h = _worker().allreduce_now_or_async(_state.op_name("allreduce", name), _ref(work),
                                         _ref(work), core_op(op), prescale_factor,
                                         postscale_factor)
    raise_for_status(*h.wait(_state.op_timeout_s()))
    if work is not tensor:
        tensor.copy_(work)
    return tensor


def _grouped_names(kind, name, count):
    base = _state.op_name(kind, name)
    return ["%s.%d" % (base, i) for i in range(count)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place, negotiated together; synchronize returns the list."""
    op = resolve_op(op, average)
    _check_process_set(process_set)
    tensors = list(tensors)
    work = [_contiguous(t) for t in tensors]
    handles = _worker().grouped_allreduce_async(_grouped_names("grouped_allreduce", name, len(work)),
                                                [_ref(w) for w in work], core_op(op),
                                                prescale_factor, postscale_factor)

    def finish(_):
        for t, w in zip(tensors, work):
            if w is not t:
                t.copy_(w)
        return tensors

    return _register(handles, finish, work)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Out-of-place grouped allreduce; synchronize returns a list of new tensors."""
    outputs = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(outputs, average, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed = [compression.compress(t) for t in tensors]
    reduced = synchronize(grouped_allreduce_async([c for c, _ in compressed], average, name, op,
                                                  prescale_factor, postscale_factor, process_set))
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]


# ---- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather along dimension 0 (which may differ per rank)."""
    _check_process_set(process_set)
    source = _contiguous(tensor)
    h = _worker().allgather_async(_state.op_name("allgather", name), _ref(source, moving_bytes=True))
    return _register([h], lambda hs: _from_output(hs[0].output(), tensor), source)


class HorovodAllgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's slice of the averaged gradient (as Horovod)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, average=True, process_set=ctx.process_set)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64), process_set=ctx.process_set)
        offset = int(rows[:_state.worker().rank].sum().item())
        return grad.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 into a new tensor."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    _check_process_set(process_set)
    tensors = list(tensors)
    sources = [_contiguous(t) for t in tensors]
    names = _grouped_names("grouped_allgather", name, len(sources))
    handles = [_worker().allgather_async(n, _ref(s, moving_bytes=True)) for n, s in zip(names, sources)]
    return _register(handles, lambda hs: [_from_output(h.output(), t) for h, t in zip(hs, tensors)],
                     sources)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# ---- broadcast

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of root_rank's tensor."""
    _check_process_set(process_set)
    work = _contiguous(tensor)
    h = _worker().broadcast_async(_state.op_name("broadcast", name), _ref(work, moving_bytes=True),
                                  root_rank)

    def finish(_):
        if work is not tensor:
            tensor.copy_(work)
        return tensor

    return _register([h], finish, work)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an out-of-place broadcast; synchronize returns a new tensor."""
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return broadcast_async_(output, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast whose gradient is the averaged gradient on the root, zero elsewhere (as Horovod)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, average=True, process_set=ctx.process_set)
        if _state.worker().rank != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a new tensor holding root_rank's `tensor`."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall

def _split_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        return [int(s) for s in splits.flatten().tolist()]
    return [int(s) for s in splits]


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: splits[r] rows of dimension 0 go to rank r (default: equal parts).
    synchronize returns (output, received_splits)."""
    _check_process_set(process_set)
    source = _contiguous(tensor)
    h = _worker().alltoall_async(_state.op_name("alltoall", name), _ref(source, moving_bytes=True),
                                 _split_list(splits))

    def finish(hs):
        received = torch.tensor(hs[0].received_splits(), dtype=torch.int32)
        return _from_output(hs[0].output(), tensor), received

    return _register([h], finish, source)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Returns the rows every rank sent here (in rank order); with `splits`, also the received
    splits (an int32 tensor), as Horovod does."""
    output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# ---- reducescatter

def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=global_process_set):
    """Starts a reducescatter: reduce over ranks, rank r keeps its block of dimension 0."""
    _check_process_set(process_set)
    source = _contiguous(tensor)
    h = _worker().reducescatter_async(_state.op_name("reducescatter", name), _ref(source),
                                      core_op(op), prescale_factor, postscale_factor)
    return _register([h], lambda hs: _from_output(hs[0].output(), tensor), source)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed, ctx = compression.compress(tensor)
    out = synchronize(reducescatter_async(compressed, name, op, prescale_factor, postscale_factor,
                                          process_set))
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    _check_process_set(process_set)
    tensors = list(tensors)
    sources = [_contiguous(t) for t in tensors]
    names = _grouped_names("grouped_reducescatter", name, len(sources))
    handles = [_worker().reducescatter_async(n, _ref(s), core_op(op), prescale_factor, postscale_factor)
               for n, s in zip(names, sources)]
    return _register(handles, lambda hs: [_from_output(h.output(), t) for h, t in zip(hs, tensors)],
                     sources)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_reducescatter_async([c for c, _ in compressed], name, op,
                                                   prescale_factor, postscale_factor, process_set))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, compressed)]


# ---- barrier, join

def barrier(process_set=global_process_set):
    """Returns once every rank called barrier()."""
    _check_process_set(process_set)
    h = _worker().barrier_async()
    raise_for_status(*h.wait(_state.op_timeout_s()))


def join(device=-1):
    """This rank is out of data: takes part in the others' collectives with neutral values until
    every rank joined. Returns the last rank to join (it saw every step)."""
    h = _worker().join_async()
    raise_for_status(*h.wait(_state.op_timeout_s()))
    return h.join_result()


# ---- basics

def init(comm=None, process_sets=None):
    """Joins the job started by hvrun. `comm` (an MPI communicator) is not supported."""
    if comm is not None:
        raise NotImplementedError("hvrun.torch.init: MPI communicators are not supported")
    _state.init()


def shutdown():
    """Leaves the job; pending handles fail. The tensors they use are released only after the
    library stopped (it may be writing into them until then)."""
    _state.shutdown()
    with _handle_lock:
        _handle_map.clear()


__all__ = [
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "HorovodInternalError",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "init", "shutdown", "poll", "synchronize",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "barrier", "join",
]

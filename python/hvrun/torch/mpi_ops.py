"""Horovod's collective operations on torch tensors (horovod.torch.mpi_ops), on hvrun.

Same names, arguments (order included) and defaults as horovod.torch 0.28.1. Handles are
integers; poll(handle) and synchronize(handle) take them (handles.py). Every rank submits the
same operations (names are made from a per-process counter when none is given, so unnamed calls
must come in the same order on every rank, as in Horovod). A failed operation raises
HorovodInternalError on synchronize: a peer that died, an abort, metadata that differs between
ranks (named in the message), a timeout. Arguments that cannot be right raise ValueError (or
TypeError) at the call, before anything is sent.

Average, as Horovod computes it: the sum times 1/size (joined ranks count, contributing zeros),
scaled in the result's type; a job started with --join-average (HVRUN_JOIN_AVERAGE) gets the
library's Average instead, which divides as that setting says.

CPU tensors and CUDA tensors: a CUDA tensor is handed to the worker library with its device and
torch's current stream on that device; results are ready on that stream when synchronize returns.
Tensors are passed without copies when contiguous (a non-contiguous tensor is copied, and for
the in-place variants copied back).
"""
import functools
import os

import numpy as np
import torch

from hvrun import _core, _state
from hvrun._tensors import (CORE_SUM, Adasum, Average, Max, Min, Product, Sum, core_op,
                            resolve_op)
from hvrun._tensors import op_name as _op_name
from hvrun.exceptions import HorovodInternalError, HvrunError, raise_for_status
from hvrun.torch.compression import Compression
from hvrun.torch.handles import (check_name_free, check_not_in_flight, poll, register,
                                 register_one, synchronize)
from hvrun.torch import handles as _handles
from hvrun.torch.handles import _table
from hvrun.torch.handles import _in_flight  # the names in flight: one set, mutated in place
from hvrun.torch.tensor_refs import _TORCH_DTYPES, _contiguous, _from_output, _ref
from hvrun.basics import placement_local_sizes, set_layout
from hvrun.process_sets import (ProcessSet, add_initial_process_sets,  # noqa: F401
                                check_initial_process_sets,
                                add_process_set, global_process_set, process_set_id,
                                process_set_size, remove_process_set, set_global_ranks)


def _worker():
    return _state.worker()


_join_average_given = "HVRUN_JOIN_AVERAGE" in os.environ  # fixed for the process: hvrun sets it


def _reduction(op, prescale_factor, postscale_factor, process_set=global_process_set):
    """(library op, prescale, postscale) for one of Horovod's ops, Average as Horovod's: over
    the ranks of the process set."""
    if op == Average and not _join_average_given:
        return CORE_SUM, prescale_factor, postscale_factor / process_set_size(process_set)
    return core_op(op), prescale_factor, postscale_factor


def _submit(names, submit):
    """Runs `submit` (which sends `names`) unless a name is in flight (ValueError)."""
    check_not_in_flight(names)
    return submit()


_JOIN_REFUSED = {
    "allgather": "Allgather is not supported with Join at this time. Specify "
                 "sparse_to_dense=True if using DistributedOptimizer",
    "broadcast": "Broadcast is not supported with Join at this time.",
}


def _refuse_under_join(kind, handles):
    """Horovod's rule: allgather and broadcast fail while ranks have joined."""
    for h in handles:
        joined = h.joined_ranks()
        if joined:
            raise HorovodInternalError("%s: %s (ranks %s had joined)" % (
                h.name, _JOIN_REFUSED[kind], ", ".join(str(r) for r in joined)),
                "FAILED_PRECONDITION")


# ---- allreduce

_allreduce_names = {}  # a user's str name -> "allreduce.<name>", made once


def _allreduce_name(name):
    """_state.op_name("allreduce", name), remembered for str names (the steady state calls the
    same names every step; unnamed calls get a new name each time and are never remembered)."""
    full = _allreduce_names.get(name) if name.__class__ is str else None
    if full is None:
        full = _state.op_name("allreduce", name)
        if name.__class__ is str and len(_allreduce_names) < 65536:
            _allreduce_names[name] = full
    return full


_global_reductions = {}  # (op, prescale, postscale) -> _reduction(...) on the global set


# A blocking CPU call's str name -> (op, prescale, postscale, (full name, library op, prescale,
# postscale)): the last global-set call made under that name with those arguments, for the
# steady state, which makes the same calls every step. Keyed by the name alone, so the
# extension's lookup hashes nothing new; the arguments are compared (==) on the way.
_blocking_calls = {}


# The same for allreduce_async_ (in place, no average=): what the extension's table takes.
_async_calls = {}


def _remembered(calls, name, op, prescale_factor, postscale_factor):
    entry = calls.get(name)
    if (entry is not None and entry[0] == op and entry[1] == prescale_factor and
            entry[2] == postscale_factor):
        return entry[3]
    return None


def _remember(calls, name, op, prescale_factor, postscale_factor, call):
    if len(calls) < 65536 or name in calls:
        calls[name] = (op, prescale_factor, postscale_factor, call)


def _forget_global_reductions(_worker):
    _global_reductions.clear()  # Average divides by the job's size, which the next init sets
    _blocking_calls.clear()
    _async_calls.clear()


_state.add_worker_listener(_forget_global_reductions)


def _global_reduction(op, prescale_factor, postscale_factor):
    """_reduction(...) on the global set, remembered: the hot paths call it with the same
    arguments every step."""
    key = (op, prescale_factor, postscale_factor)
    reduction = _global_reductions.get(key)
    if reduction is None:
        reduction = _global_reductions[key] = _reduction(op, prescale_factor, postscale_factor)
    return reduction


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an out-of-place allreduce; synchronize(handle) returns the reduced tensor."""
    op = resolve_op(op, average)
    ps = process_set_id(process_set)
    source = _contiguous(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    full = _state.op_name("allreduce", name, ps)
    library_op, pre, post = _reduction(op, prescale_factor, postscale_factor, process_set)
    h = _submit([full], lambda: _worker().allreduce_async(full, _ref(source), _ref(output),
                                                          library_op, pre, post, ps))
    return register([full], [h], lambda _: output, (source, output))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; synchronize(handle) returns `tensor`, reduced."""
    # The steady state (a call remembered below) never gets here: see the wrapper after this.
    remember = average is None and process_set is global_process_set and name.__class__ is str
    op_given = op
    if average is not None or op is None:
        op = resolve_op(op, average)
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    if process_set is global_process_set:
        ps = 0
        full = _allreduce_name(name)
        library_op, pre, post = _global_reduction(op, prescale_factor, postscale_factor)
    else:
        ps = process_set_id(process_set)
        full = _state.op_name("allreduce", name, ps)
        library_op, pre, post = _reduction(op, prescale_factor, postscale_factor, process_set)
    code = None if work.is_cuda or ps != 0 else _TORCH_DTYPES.get(work.dtype)
    if code is not None:
        # A CPU tensor of the global set: its address, dtype and shape as they are (no
        # TensorRef objects), as allreduce_ passes them.
        check_name_free(full)
        if work is tensor:
            handle = _table.allreduce_inplace(_worker(), full, tensor, library_op, pre, post)
            if handle is not None:
                if remember:
                    _remember(_async_calls, name, op_given, prescale_factor, postscale_factor,
                              (full, library_op, pre, post))
                return handle
            check_name_free(full)  # raises when another thread took the name meanwhile
        h = _worker().allreduce_inplace_async(full, work.data_ptr(), code, work.shape,
                                              library_op, pre, post)
    else:
        h = _submit([full], lambda: _worker().allreduce_async(full, _ref(work), _ref(work),
                                                              library_op, pre, post, ps))
    if work is tensor:
        return register_one(full, h, _return_tensor, tensor)

    def finish(_):
        tensor.copy_(work)
        return tensor

    return register([full], [h], finish, work)


# A named in-place call of a contiguous CPU tensor on the global set, made before with the same
# op and scaling (_async_calls), goes from this C callable straight to the extension's table;
# every other call to the function above.
allreduce_async_ = functools.update_wrapper(
    _core.fast_function("allreduce_async_", allreduce_async_, _table, _state,
                        calls=_async_calls, global_set=global_process_set), allreduce_async_)


def _return_tensor(tensor):
    return tensor


def _cpu_allreduce_blocking(source, output, name, op, prescale_factor, postscale_factor):
    """The blocking allreduce of contiguous CPU `source` into `output` (the same tensor: in
    place) on the global set, in one extension call: the fast path when the tensor was
    negotiated before. Returns `output`."""
    worker = _state._worker
    if worker is None:
        worker = _state.worker()  # raises as Horovod does
    if name.__class__ is str:
        call = _remembered(_blocking_calls, name, op, prescale_factor, postscale_factor)
        if call is None:
            call = (_allreduce_name(name),) + _global_reduction(op, prescale_factor,
                                                                postscale_factor)
            _remember(_blocking_calls, name, op, prescale_factor, postscale_factor, call)
    else:
        call = (_allreduce_name(name),) + _global_reduction(op, prescale_factor,
                                                            postscale_factor)
    full = call[0]
    if full in _in_flight:
        check_not_in_flight([full])  # raises
    code = _TORCH_DTYPES.get(source.dtype)
    if code is None:
        _ref(source)  # raises the TypeError naming the dtype
    # Addresses, dtype and shape as they are: a TensorRef costs most of a fast-path call.
    failed = worker.allreduce_blocking(full, source.data_ptr(), output.data_ptr(), code,
                                       source.shape, call[1], call[2], call[3],
                                       _state._op_timeout_s)
    if failed is not None:
        raise_for_status(*failed)
    return output


def _cpu_allreduce_out(tensor, name, op, prescale_factor, postscale_factor):
    source = tensor if tensor.is_contiguous() else tensor.contiguous()
    # Contiguous like `source` (empty_like preserves dense strides; naming the format costs).
    return _cpu_allreduce_blocking(source, torch.empty_like(source), name, op, prescale_factor,
                                   postscale_factor)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient (same op and scaling)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        if process_set is global_process_set and not tensor.is_cuda:
            return _cpu_allreduce_out(tensor, name, resolve_op(op, average), prescale_factor,
                                      postscale_factor)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(grad_output, average=average, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set)
        return grad, None, None, None, None, None, None


_NO_COMPRESSION = Compression.none
_empty_like = torch.empty_like  # module globals: the 4-byte call looks them up every time


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over every rank (default op: Average) into a new tensor."""
    if (compression is _NO_COMPRESSION and process_set is global_process_set and
            not tensor.is_cuda and not (tensor.requires_grad and torch.is_grad_enabled())):
        # No graph to record: what the autograd Function's forward would run, without it.
        if average is not None or op is None:
            op = resolve_op(op, average)
        source = tensor if tensor.is_contiguous() else tensor.contiguous()
        return _cpu_allreduce_blocking(source, _empty_like(source), name, op, prescale_factor,
                                       postscale_factor)
    compressed, ctx = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                     postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place and returns it."""
    if process_set is not global_process_set or tensor.is_cuda:
        return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                            postscale_factor, process_set))
    # CPU: blocking in the library, so a named, already negotiated tensor may take the fast path.
    if average is not None or op is None:
        op = resolve_op(op, average)
    if tensor.is_contiguous():
        return _cpu_allreduce_blocking(tensor, tensor, name, op, prescale_factor,
                                       postscale_factor)
    work = tensor.contiguous()
    _cpu_allreduce_blocking(work, work, name, op, prescale_factor, postscale_factor)
    tensor.copy_(work)
    return tensor


# The blocking calls' steady state (a call _cpu_allreduce_blocking remembered) in C as well.
_blocking = dict(calls=_blocking_calls, global_set=global_process_set,
                 raise_failure=_handles._raise_failure, average_op=Average)
allreduce_ = functools.update_wrapper(
    _core.fast_function("allreduce_", allreduce_, _table, _state, **_blocking), allreduce_)
allreduce = functools.update_wrapper(
    _core.fast_function("allreduce", allreduce, _table, _state, no_compression=_NO_COMPRESSION,
                        empty_like=_empty_like, **_blocking), allreduce)


def _grouped_names(kind, name, count, ps=0):
    base = _state.op_name(kind, name, ps)
    return ["%s.%d" % (base, i) for i in range(count)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place, negotiated together; synchronize returns the list."""
    op = resolve_op(op, average)
    ps = process_set_id(process_set)
    tensors = list(tensors)
    work = [_contiguous(t) for t in tensors]
    names = _grouped_names("grouped_allreduce", name, len(work), ps)
    library_op, pre, post = _reduction(op, prescale_factor, postscale_factor, process_set)
    handles = _submit(names, lambda: _worker().grouped_allreduce_async(
        names, [_ref(w) for w in work], library_op, pre, post, ps))

    def finish(_):
        for t, w in zip(tensors, work):
            if w is not t:
                t.copy_(w)
        return tensors

    return register(names, handles, finish, work)


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


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce whose gradients are the grouped allreduce of the gradients."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), average, name, op,
                                                         prescale_factor, postscale_factor,
                                                         process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        average, op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = grouped_allreduce(list(grad_outputs), average=average, op=op,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, process_set=process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed = [compression.compress(t) for t in tensors]
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                            process_set, *[c for c, _ in compressed])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse COO tensor as Horovod does: allgathers every rank's indices and values
    (no densification). Returns a callable; calling it waits and returns the summed (Average:
    divided by the number of ranks) sparse tensor, with duplicate indices left uncoalesced."""
    t = tensor
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name="%s.indices" % name, process_set=process_set)
    values_handle = allgather_async(t._values(), name="%s.values" % name,
                                    process_set=process_set)

    def handle():
        values, indices = _handles.synchronize_all([values_handle, indices_handle])
        if op == Average:
            values = values / process_set_size(process_set)
        if indices.dim() == 0 or values.dim() == 0:
            return t.new().resize_as_(t)
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(),
                                       check_invariants=False)  # every index is a peer's valid one

    return handle


# ---- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather along dimension 0 (which may differ per rank)."""
    ps = process_set_id(process_set)
    source = _contiguous(tensor)
    full = _state.op_name("allgather", name, ps)
    h = _submit([full], lambda: _worker().allgather_async(full, _ref(source, moving_bytes=True),
                                                          ps))

    def finish(hs):
        _refuse_under_join("allgather", hs)
        return _from_output(hs[0].output(), tensor)

    return register([full], [h], finish, source)


def _offsets_of_rank(rows, process_set):
    """This rank's first row in each gathered tensor, from every rank's row counts."""
    counts = grouped_allgather([torch.tensor([r], dtype=torch.int64) for r in rows],
                               process_set=process_set)
    me = _worker().rank if process_set_id(process_set) == 0 else process_set.rank()
    return [int(c[:me].sum().item()) for c in counts]


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
        offset = _offsets_of_rank([ctx.rows], ctx.process_set)[0]
        return grad.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 into a new tensor."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    ps = process_set_id(process_set)
    tensors = list(tensors)
    sources = [_contiguous(t) for t in tensors]
    names = _grouped_names("grouped_allgather", name, len(sources), ps)
    handles = _submit(names, lambda: [_worker().allgather_async(n, _ref(s, moving_bytes=True), ps)
                                      for n, s in zip(names, sources)])

    def finish(hs):
        _refuse_under_join("allgather", hs)
        return [_from_output(h.output(), t) for h, t in zip(hs, tensors)]

    return register(names, handles, finish, sources)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather; each gradient is this rank's slice of the averaged gradient."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), average=True, process_set=ctx.process_set)
        offsets = _offsets_of_rank(ctx.rows, ctx.process_set)
        return (None, None, *[g.narrow(0, o, n) for g, o, n in zip(grads, offsets, ctx.rows)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---- broadcast

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of root_rank's tensor."""
    ps = process_set_id(process_set)
    work = _contiguous(tensor)
    full = _state.op_name("broadcast", name, ps)
    h = _submit([full], lambda: _worker().broadcast_async(full, _ref(work, moving_bytes=True),
                                                          root_rank, ps))

    def finish(hs):
        _refuse_under_join("broadcast", hs)
        if work is not tensor:
            tensor.copy_(work)
        return tensor

    return register([full], [h], finish, work)


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

def _split_list(tensor, splits, process_set=global_process_set):
    """`splits` as a list of row counts, checked as Horovod checks them (ValueError): one per
    rank of the process set."""
    size = process_set_size(process_set)
    if tensor.dim() == 0:
        raise ValueError("alltoall: the tensor must have at least one dimension (rows are sent)")
    rows = tensor.shape[0]
    if splits is None:
        if rows % size != 0:
            raise ValueError("alltoall: tensor(dim 0) of %d rows does not split evenly over %d "
                             "ranks; pass splits (rows for each rank)" % (rows, size))
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or splits.dtype == torch.bool:
            raise ValueError("alltoall: splits must hold integers, not %s" % splits.dtype)
        values = splits.flatten().tolist()
    else:
        try:
            values = list(splits)
        except TypeError:
            raise ValueError("alltoall: splits must be a list or tensor of row counts, not %s"
                             % type(splits).__name__)
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in values):
            raise ValueError("alltoall: splits must hold integers, got %r" % (splits,))
    values = [int(v) for v in values]
    if len(values) != size:
        raise ValueError("alltoall: splits has %d entries for %d ranks" % (len(values), size))
    if any(v < 0 for v in values):
        raise ValueError("alltoall: splits must be non-negative, got %r" % (values,))
    if sum(values) != rows:
        raise ValueError("alltoall: splits sum to %d but the tensor has %d rows (dim 0)"
                         % (sum(values), rows))
    return values


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: splits[r] rows of dimension 0 go to rank r (default: equal parts).
    synchronize returns (output, received_splits)."""
    ps = process_set_id(process_set)
    # The name first: an unnamed call refused below still uses its number, on every rank, so
    # a refusal on some ranks only (rows that differ) leaves the next names the same everywhere.
    full = _state.op_name("alltoall", name, ps)
    split_rows = _split_list(tensor, splits, process_set)
    source = _contiguous(tensor)
    h = _submit([full], lambda: _worker().alltoall_async(full, _ref(source, moving_bytes=True),
                                                         split_rows, ps))

    def finish(hs):
        received = torch.tensor(hs[0].received_splits(), dtype=torch.int32)
        return _from_output(hs[0].output(), tensor), received

    return register([full], [h], finish, source)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall whose gradient goes back the way the rows came: an alltoall of the gradient
    with the received splits (as Horovod)."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Returns the rows every rank sent here (in rank order); with `splits`, also the received
    splits (an int32 tensor), as Horovod does."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---- reducescatter

def _reducescatter_submit(tensors, names, op, process_set, prescale_factor, postscale_factor):
    """Submits one reducescatter per tensor; returns (library handles, tensors they read)."""
    if op not in (Average, Sum):
        # A RuntimeError naming the op, as Horovod's; not HorovodInternalError (nothing failed
        # in the job, so an elastic run must not reset for it).
        raise HvrunError("Reducescatter currently only supports Average and Sum (got op %s)"
                         % _op_name(op), "INVALID_ARGUMENT")
    ps = process_set_id(process_set)
    sources = [_contiguous(t) for t in tensors]
    library_op, pre, post = _reduction(op, prescale_factor, postscale_factor, process_set)
    handles = _submit(names, lambda: [_worker().reducescatter_async(n, _ref(s), library_op, pre,
                                                                    post, ps)
                                      for n, s in zip(names, sources)])
    return handles, sources


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter: reduce over ranks, rank r keeps its block of dimension 0."""
    names = [_state.op_name("reducescatter", name, process_set_id(process_set))]
    handles, sources = _reducescatter_submit([tensor], names, op, process_set, prescale_factor,
                                             postscale_factor)
    return register(names, handles, lambda hs: _from_output(hs[0].output(), tensor), sources)


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is the allgather of the gradient, times size for Sum and
    times the scale factors (Horovod's formula)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.args = (op, process_set, prescale_factor, postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        return (_reducescatter_grads([grad_output], *ctx.args)[0],
                None, None, None, None, None)


def _reducescatter_grads(grads, op, process_set, prescale_factor, postscale_factor):
    factor = (process_set_size(process_set) if op == Sum else 1) * prescale_factor * postscale_factor
    scaled = [g * factor if factor != 1 else g for g in grads]
    return grouped_allgather(scaled, process_set=process_set)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    tensors = list(tensors)
    names = _grouped_names("grouped_reducescatter", name, len(tensors),
                           process_set_id(process_set))
    handles, sources = _reducescatter_submit(tensors, names, op, process_set, prescale_factor,
                                             postscale_factor)
    return register(names, handles,
                    lambda hs: [_from_output(h.output(), t) for h, t in zip(hs, tensors)], sources)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; gradients as HorovodReducescatter's, gathered as one group."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.args = (op, process_set, prescale_factor, postscale_factor)
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                             prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        return (None, None, None, None, None,
                *_reducescatter_grads(list(grad_outputs), *ctx.args))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    compressed = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                             postscale_factor, *[c for c, _ in compressed])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, compressed)]


# ---- barrier, join

def barrier(process_set=global_process_set):
    """Returns once every rank (of the process set) called barrier()."""
    h = _worker().barrier_async(process_set_id(process_set))
    raise_for_status(*h.wait(_state.op_timeout_s()))


def join(device=-1):
    """This rank is out of data: takes part in the others' collectives with neutral values until
    every rank joined. Returns the last rank to join (it saw every step)."""
    h = _worker().join_async()
    raise_for_status(*h.wait(_state.op_timeout_s()))
    return h.join_result()


# ---- basics

def _before_parking():
    """A hot spare (hvrun --spares) waits for a lost rank's place in hvd.elastic.run. What a
    PyTorch trainer imports lazily inside its training function would then be paid inside the
    reset, with every rank waiting: torch.optim's first optimizer imports torch._dynamo (over a
    second on a loaded 2-vCPU host). The spare pays it at init(), while the job runs."""
    if not _state.is_spare_process():
        return
    try:
        import torch._dynamo  # noqa: F401
    except ImportError:
        pass


def init(comm=None, process_sets=None):
    """Joins the job started by hvrun. `comm` (an MPI communicator) is not supported.
    `process_sets`: Horovod's static sets (ProcessSet objects or rank lists, added in order with
    ids 1, 2, ...; every rank passes the same list) or "dynamic"."""
    if comm is not None:
        raise NotImplementedError("hvrun.torch.init: MPI communicators are not supported")
    check_initial_process_sets(process_sets)
    if _state.is_initialized():
        return
    _before_parking()
    _state.init()
    w = _worker()
    set_global_ranks(w.size)
    if _state.is_parked_spare():
        # No collective yet: its real layout comes with the init() hvd.elastic.run makes.
        set_layout([w.local_size])
        return
    # Homogeneous: every host runs as many ranks as every other. The coordinator's placement
    # says it; else each rank's local size is its host's rank count, and one allgather at init
    # gives the real layout to every rank.
    local_sizes = placement_local_sizes(w)
    if local_sizes is None:
        local_sizes = synchronize(allgather_async(torch.tensor([w.local_size], dtype=torch.int32),
                                                  name="hvrun.init.local_sizes")).tolist()
    set_layout(local_sizes)
    add_initial_process_sets(process_sets)


def shutdown():
    """Leaves the job; pending handles fail. The tensors they use are released only after the
    library stopped (it may be writing into them until then)."""
    _state.shutdown()
    set_global_ranks(None)
    _handles.clear()


__all__ = [
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "HorovodInternalError",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "init", "shutdown", "poll", "synchronize",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "sparse_allreduce_async",
    "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "barrier", "join",
]

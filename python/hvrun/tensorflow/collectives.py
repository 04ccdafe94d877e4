"""Horovod's user-facing collectives (horovod.tensorflow.allreduce, ...): compression,
tf.IndexedSlices, the deprecated `average` argument, over the raw ops of mpi_ops."""
import tensorflow as tf

from hvrun.elastic import is_elastic
from hvrun.process_sets import global_process_set, process_set_id, process_set_size
from hvrun.tensorflow.compression import Compression
from hvrun.tensorflow.mpi_ops import (Adasum, Average, Sum, _allreduce, _grouped_allreduce,
                                      _grouped_reducescatter, _reducescatter, allgather,
                                      grouped_allgather, handle_average_backwards_compatibility,
                                      size_op)


def _check_op(op):
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum; use Average or Sum")


def _check_sparse(op, prescale_factor, postscale_factor):
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")


def _sparse_result(values, indices, like, op, process_set):
    if op == Average:
        if is_elastic():
            # The size when the graph runs: a traced step outlives the membership it was
            # traced in.
            size = size_op(process_set_id(process_set))
        else:
            size = process_set_size(process_set)
        values = values / tf.cast(size, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=like.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces a tf.Tensor (or tf.Variable) over the ranks of `process_set` (every rank by
    default); Average by default.

    A tf.IndexedSlices is gathered instead (values and indices from every member; divided by
    the set's size for Average), which is the reduction of the dense tensor it stands for."""
    op = handle_average_backwards_compatibility(op, average)
    _check_op(op)
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor)
        with tf.device(device_sparse):
            values = allgather(tensor.values, process_set=process_set,
                               ignore_name_scope=ignore_name_scope)
            indices = allgather(tensor.indices, process_set=process_set,
                                ignore_name_scope=ignore_name_scope)
            return _sparse_result(values, indices, tensor, op, process_set)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        reduced = _allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor,
                             ignore_name_scope=ignore_name_scope, process_set=process_set)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce of every tensor of `tensors` in one negotiation (tf.IndexedSlices gathered)."""
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    _check_op(op)
    results = [None] * len(tensors)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor)
        with tf.device(device_sparse):
            for i in sparse:
                t = tensors[i]
                values = allgather(t.values, process_set=process_set,
                                   ignore_name_scope=ignore_name_scope)
                indices = allgather(t.indices, process_set=process_set,
                                    ignore_name_scope=ignore_name_scope)
                results[i] = _sparse_result(values, indices, t, op, process_set)
    if dense:
        with tf.device(device_dense):
            compressed, ctxs = zip(*[compression.compress(tensors[i]) for i in dense])
            # One grouped op per dtype: the op's tensors share one.
            by_dtype = {}
            for position, t in enumerate(compressed):
                by_dtype.setdefault(t.dtype, []).append(position)
            for dtype_index, positions in enumerate(by_dtype.values()):
                group_name = name if name is None or len(by_dtype) == 1 else "%s_%d" % (name, dtype_index)
                reduced = _grouped_allreduce([compressed[p] for p in positions], name=group_name,
                                             op=op, prescale_factor=prescale_factor,
                                             postscale_factor=postscale_factor,
                                             ignore_name_scope=ignore_name_scope,
                                             process_set=process_set)
                for p, r in zip(positions, reduced):
                    results[dense[p]] = compression.decompress(r, ctxs[p])
    return results


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over every rank and keeps this rank's share of dimension 0 (rank r gets
    dim0 / size rows, one more when r < dim0 % size)."""
    _check_op(op)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        reduced = _reducescatter(compressed, name=name, op=op, ignore_name_scope=ignore_name_scope,
                                 process_set=process_set, prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          name=None, process_set=global_process_set, ignore_name_scope=False,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of every tensor of `tensors` (one dtype) in one op."""
    if not tensors:
        return tensors
    with tf.device(device_dense):
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
        reduced = _grouped_reducescatter(list(compressed), name=name, op=op,
                                         ignore_name_scope=ignore_name_scope,
                                         process_set=process_set,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor)
        return [compression.decompress(r, c) for r, c in zip(reduced, ctxs)]


__all__ = ["allreduce", "grouped_allreduce", "reducescatter", "grouped_reducescatter",
           "grouped_allgather"]

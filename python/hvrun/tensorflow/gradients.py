"""How gradients are averaged over the ranks, shared by every TensorFlow wrapper: the gradient
tape and the tf.compat.v1 optimizer (optimizer.py) and the Keras optimizer (keras_optimizer.py)."""
import tensorflow as tf

from hvrun.elastic import is_elastic
from hvrun.process_sets import global_process_set, process_set_size
from hvrun.tensorflow.collectives import allreduce, grouped_allreduce
from hvrun.tensorflow.mpi_ops import Adasum, Average, _executing_eagerly


def _scale_factors(op, gradient_predivide_factor):
    """Horovod's split of Average: 1/f before the sum, f/size after it."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Average:
        return 1.0 / gradient_predivide_factor, gradient_predivide_factor
    return 1.0, 1.0


def _split_groups(grads, groups):
    """Horovod's `groups`: a count of groups, or lists of variables (the rest one each)."""
    present = [i for i, g in enumerate(grads) if g is not None]
    if isinstance(groups, int):
        per = -(-len(present) // groups) if present else 1
        return [present[k:k + per] for k in range(0, len(present), per)]
    raise ValueError("hvrun: groups given as lists of variables need the variables; pass "
                     "an integer number of groups")


def make_allreduce_grads_fn(name, device_dense, device_sparse, compression, sparse_as_dense, op,
                            gradient_predivide_factor, groups, process_set=global_process_set):
    """A function grads -> grads averaged over the ranks of `process_set`. Eagerly it runs as
    one tf.function, so every gradient's allreduce is submitted at once and they fuse; in a
    graph it adds the ops."""
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum; use Average or Sum")
    prescale, postscale = _scale_factors(op, gradient_predivide_factor)

    def allreduce_grads(grads):
        # Alone, nothing to average; but a traced step keeps what it was traced with, and an
        # elastic job that starts alone may grow: there the allreduce stays in.
        if process_set_size(process_set) == 1 and not is_elastic():
            return list(grads)
        # A rank outside the process set keeps its own gradients (Horovod's rule): the set's
        # members reduce among themselves and wait for no one else.
        if not process_set.included():
            return list(grads)
        with tf.name_scope(name + "_Allreduce"):
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                         for g in grads]
            if groups:
                reduced = list(grads)
                for group in _split_groups(grads, groups):
                    outputs = grouped_allreduce([grads[i] for i in group], device_dense=device_dense,
                                                device_sparse=device_sparse, compression=compression,
                                                op=op, prescale_factor=prescale,
                                                postscale_factor=postscale, process_set=process_set)
                    for i, out in zip(group, outputs):
                        reduced[i] = out
                return reduced
            return [allreduce(g, device_dense=device_dense, device_sparse=device_sparse,
                              compression=compression, op=op, prescale_factor=prescale,
                              postscale_factor=postscale, process_set=process_set)
                    if g is not None else None for g in grads]

    if _executing_eagerly():
        return tf.function(allreduce_grads)
    return allreduce_grads


def check_groups(groups, num_groups):
    if num_groups:
        groups = groups or num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of tf.Variable.")
    return groups


def variable_key(variable):
    """A hashable key for a variable: tf.Variable's ref(); a Keras 3 variable (which has no
    ref()) is keyed by its backing tf.Variable, so the Keras variable and the tf.Variable that
    Keras hands to TensorFlow are the same source."""
    if hasattr(variable, "ref"):
        return variable.ref()
    # `_value` is the tf.Variable itself; `value` may be a cast of it under mixed precision.
    for attribute in ("_value", "value"):
        backing = getattr(variable, attribute, None)
        if isinstance(backing, tf.Variable):
            return backing.ref()
    return ("id", id(variable))


def scale_gradient(grad, scale):
    """grad * scale (an IndexedSlices' values); None and scale None leave it as it is."""
    if grad is None or scale is None:
        return grad
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * scale, grad.indices, grad.dense_shape)
    return grad * scale

"""Gradient averaging for custom loops and tf.compat.v1 optimizers, as horovod.tensorflow's
DistributedGradientTape and DistributedOptimizer (Keras 3 optimizers: hvrun.tensorflow.keras)."""
import tensorflow as tf

from hvrun.elastic import is_elastic
from hvrun.process_sets import global_process_set, process_set_size
from hvrun.tensorflow.collectives import allreduce, grouped_allreduce
from hvrun.tensorflow.compression import Compression
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


def _check_groups(groups, num_groups):
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


class _DistributedGradientTape(tf.GradientTape):
    """tf.GradientTape whose gradient() returns the gradients averaged over every rank."""

    def _hvrun_setup(self, allreduce_grads, local_scale):
        self._allreduce_grads = allreduce_grads
        self._local_sources = set()
        self._local_scale = local_scale

    def register_local_source(self, source):
        """This source's gradient stays this rank's own (not reduced); with
        scale_local_gradients (the default) divided by the process set's size, as Horovod's."""
        self._local_sources.add(variable_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False,
                 **kwargs):
        del use_generic_names
        single = not isinstance(sources, (list, tuple))
        source_list = [sources] if single else list(sources)
        grads = super().gradient(target, source_list, output_gradients, **kwargs)
        shared = [i for i, s in enumerate(source_list)
                  if variable_key(s) not in self._local_sources]
        reduced = self._allreduce_grads([grads[i] for i in shared])
        grads = [scale_gradient(g, self._local_scale) for g in grads]  # the shared: replaced
        for i, g in zip(shared, reduced):
            grads[i] = g
        return grads[0] if single else grads


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """Wraps `gradtape`: gradient() allreduces the gradients (Average by default); those of
    register_local_source's sources stay local (scale_local_gradients: divided by the process
    set's size)."""
    groups = _check_groups(groups, num_groups)
    allreduce_grads = make_allreduce_grads_fn("DistributedGradientTape", device_dense,
                                              device_sparse, compression, sparse_as_dense, op,
                                              gradient_predivide_factor, groups, process_set)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)  # the recording already made stays the tape's
    local_scale = None
    if scale_local_gradients and process_set.included():
        local_scale = 1.0 / process_set_size(process_set)
    tape._hvrun_setup(allreduce_grads, local_scale)
    return tape


_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    """A tf.compat.v1.train optimizer whose compute_gradients averages over every rank."""

    def __init__(self, optimizer, name, use_locking, allreduce_grads):
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = allreduce_grads

    def compute_gradients(self, *args, **kwargs):
        gradients = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = zip(*gradients)
        reduced = self._allreduce_grads(list(grads))
        return list(zip(reduced, variables))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps a tf.compat.v1.train optimizer (or, as Horovod does, hands a Keras optimizer to
    hvrun.tensorflow.keras.DistributedOptimizer)."""
    del scale_local_gradients
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum; use Average or Sum")
    groups = _check_groups(groups, num_groups)
    if not isinstance(optimizer, _LegacyOptimizer):
        from hvrun.tensorflow import keras as hvd_keras
        return hvd_keras.DistributedOptimizer(
            optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
            compression=compression, sparse_as_dense=sparse_as_dense,
            gradient_predivide_factor=gradient_predivide_factor, op=op,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups,
            process_set=process_set)
    name = name or "Distributed{}".format(type(optimizer).__name__)
    allreduce_grads = make_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                              sparse_as_dense, op, gradient_predivide_factor,
                                              groups, process_set)
    if backward_passes_per_step > 1:
        raise NotImplementedError(
            "hvrun: backward_passes_per_step > 1 is supported for Keras optimizers "
            "(hvrun.tensorflow.keras.DistributedOptimizer), not for tf.compat.v1.train ones")
    return _DistributedOptimizer(optimizer, name, use_locking, allreduce_grads)


__all__ = ["DistributedGradientTape", "DistributedOptimizer"]

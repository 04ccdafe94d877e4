"""Gradient averaging for custom loops and tf.compat.v1 optimizers, as horovod.tensorflow's
DistributedGradientTape and DistributedOptimizer (Keras 3 optimizers: keras_optimizer.py)."""
import tensorflow as tf

from hvrun.process_sets import global_process_set, process_set_size
from hvrun.tensorflow.compression import Compression
from hvrun.tensorflow.gradients import (check_groups, make_allreduce_grads_fn, scale_gradient,
                                        variable_key)
from hvrun.tensorflow.mpi_ops import Adasum, Average


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
    groups = check_groups(groups, num_groups)
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
    groups = check_groups(groups, num_groups)
    if not isinstance(optimizer, _LegacyOptimizer):
        from hvrun.tensorflow import keras_optimizer  # Keras is imported for Keras optimizers only
        return keras_optimizer.DistributedOptimizer(
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

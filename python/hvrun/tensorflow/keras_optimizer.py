"""The Keras 3 optimizer that averages gradients over the ranks: hvrun.tensorflow.keras's
DistributedOptimizer, which hvrun.tensorflow.DistributedOptimizer hands Keras optimizers to (as
Horovod's does). It lives here, below both, so that neither package imports the other's.

The wrapped optimizer averages the gradients over every rank after Keras unscaled them and
before clipping and weight decay. Under a mixed_float16 policy it comes inside a
LossScaleOptimizer (what model.compile would add) whose ranks agree on whether the step's
gradients are finite, so that every rank skips the same steps.
"""
import keras
import tensorflow as tf

from hvrun.process_sets import global_process_set, process_set_size
from hvrun.tensorflow.collectives import allreduce as _allreduce
from hvrun.tensorflow.compression import Compression
from hvrun.tensorflow.gradients import make_allreduce_grads_fn, scale_gradient, variable_key
from hvrun.tensorflow.mpi_ops import Adasum, Average, Min


class _DistributedOptimizer:
    """Mixed in before a Keras optimizer's class: averages gradients over its process set.

    Without accumulation, in _backend_apply_gradients (after Keras unscaled and filtered the
    gradients, before clipping and weight decay). With backward_passes_per_step > 1, Keras's own
    gradient accumulation runs and the reduction happens in _backend_update_step, only on the
    steps that apply the accumulated gradients (clipping then sees this rank's accumulation)."""

    def _hvrun_setup(self, allreduce_grads, backward_passes_per_step, average_aggregated_gradients):
        self._hvrun_allreduce_grads = allreduce_grads
        self._hvrun_accumulating = backward_passes_per_step > 1
        self._hvrun_sum_accumulated = (self._hvrun_accumulating and
                                       not average_aggregated_gradients)
        self._hvrun_steps = backward_passes_per_step

    _hvrun_local_keys = frozenset()  # register_local_var's variables: not reduced
    _hvrun_local_scale = None  # what their gradients are multiplied by (None: left as they are)

    def register_local_var(self, var):
        """`var`'s gradient stays this rank's own (not reduced), as Horovod's; a Keras 3 or a
        tf.Variable. With scale_local_gradients (the default) it is divided by the process
        set's size, as the reduced gradients are by Average."""
        self._hvrun_local_keys = set(self._hvrun_local_keys) | {variable_key(var)}

    def _hvrun_reduce(self, grads, variables):
        grads = list(grads)
        if not self._hvrun_local_keys:
            return self._hvrun_allreduce_grads(grads)
        local = [variable_key(v) in self._hvrun_local_keys for v in variables]
        shared = iter(self._hvrun_allreduce_grads([g for g, l in zip(grads, local) if not l]))
        return [scale_gradient(g, self._hvrun_local_scale) if l else next(shared)
                for g, l in zip(grads, local)]

    def _backend_apply_gradients(self, grads, trainable_variables):
        if not self._hvrun_accumulating:
            grads = self._hvrun_reduce(grads, trainable_variables)
        return super()._backend_apply_gradients(grads, trainable_variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if self._hvrun_accumulating:
            grads = self._hvrun_reduce(grads, trainable_variables)
            if self._hvrun_sum_accumulated:  # Keras averaged them; Horovod's default sums
                grads = [g * float(self._hvrun_steps) for g in grads]
        return super()._backend_update_step(grads, trainable_variables, learning_rate)


class _AgreeingLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """A LossScaleOptimizer whose ranks agree on whether the gradients are finite (each
    rank's own check could differ: then one rank would skip the step and its allreduce while
    the others wait for it). Its inner optimizer averages the unscaled gradients."""

    _hvrun_process_set = global_process_set  # the ranks of the inner optimizer's averaging

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        if not self._hvrun_process_set.included():
            return finite  # outside the set nothing is reduced: this rank's own check
        everywhere = _allreduce(tf.cast(finite, tf.int32), op=Min,
                                name="LossScaleOptimizer_finite",
                                process_set=self._hvrun_process_set)
        return tf.equal(everywhere, 1)


def _distributed_class(optimizer_class):
    cls = type(optimizer_class.__name__, (_DistributedOptimizer, optimizer_class), {})
    # Saved models name the optimizer's own class, so they load without hvrun (load_model
    # below wraps it again).
    cls.__module__ = optimizer_class.__module__
    return cls


def _wrap(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
          gradient_predivide_factor, op, backward_passes_per_step, average_aggregated_gradients,
          groups, process_set, in_place, outermost=True):
    if op == Adasum:
        raise ValueError("op == Adasum is not supported yet with Keras")
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        inner = _wrap(optimizer.inner_optimizer, name, device_dense, device_sparse, compression,
                      sparse_as_dense, gradient_predivide_factor, op, backward_passes_per_step,
                      average_aggregated_gradients, groups, process_set, in_place,
                      outermost=False)
        if in_place:
            optimizer.__class__ = _AgreeingLossScaleOptimizer
            optimizer._hvrun_process_set = process_set
            return optimizer
        config = optimizer.get_config()
        agreeing = _AgreeingLossScaleOptimizer(inner, initial_scale=config["initial_scale"],
                                               dynamic_growth_steps=config["dynamic_growth_steps"],
                                               name=optimizer.name)
        agreeing._hvrun_process_set = process_set
        return agreeing
    if isinstance(optimizer, _DistributedOptimizer):
        return optimizer
    allreduce_grads = make_allreduce_grads_fn(name or "Distributed%s" % type(optimizer).__name__,
                                              device_dense, device_sparse, compression,
                                              sparse_as_dense, op, gradient_predivide_factor,
                                              groups, process_set)
    cls = _distributed_class(type(optimizer))
    if in_place:
        wrapped = optimizer
        wrapped.__class__ = cls  # keeps the optimizer's variables and state
    else:
        config = optimizer.get_config()
        if backward_passes_per_step > 1:
            if config.get("gradient_accumulation_steps"):
                raise ValueError("pass either backward_passes_per_step or the optimizer's "
                                 "gradient_accumulation_steps, not both")
            config["gradient_accumulation_steps"] = backward_passes_per_step
        wrapped = cls.from_config(config)
    wrapped._hvrun_setup(allreduce_grads, backward_passes_per_step, average_aggregated_gradients)
    if outermost and not in_place and keras.mixed_precision.global_policy().name == "mixed_float16":
        # What model.compile would add around it, with the ranks agreeing on finiteness.
        agreeing = _AgreeingLossScaleOptimizer(wrapped, name="loss_scale_optimizer")
        agreeing._hvrun_process_set = process_set
        return agreeing
    return wrapped


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras 3 optimizer of `optimizer`'s class and configuration that averages gradients
    over the ranks of `process_set` (op) before applying them. A LossScaleOptimizer's inner
    optimizer is the one wrapped. scale_local_gradients: the gradients of variables given to
    register_local_var are divided by the set's size (else left as they are)."""
    if num_groups:
        groups = groups or num_groups
    wrapped = _wrap(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                    gradient_predivide_factor, op, backward_passes_per_step,
                    average_aggregated_gradients, groups, process_set, in_place=False)
    inner = getattr(wrapped, "inner_optimizer", wrapped)
    if scale_local_gradients and process_set.included():
        inner._hvrun_local_scale = 1.0 / process_set_size(process_set)
    if isinstance(inner, _DistributedOptimizer) and inner is not wrapped:
        wrapped.register_local_var = inner.register_local_var
    return wrapped

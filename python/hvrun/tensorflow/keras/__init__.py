"""Horovod's Keras API (horovod.tensorflow.keras) for Keras 3 on TensorFlow: `import
hvrun.tensorflow.keras as hvd` (or `import hvrun.keras as hvd`).

    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss="mse")
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

DistributedOptimizer is hvrun.tensorflow.keras_optimizer's (hvrun.tensorflow hands Keras
optimizers to it too).
"""
import keras
import tensorflow as tf

from hvrun.process_sets import global_process_set
from hvrun.tensorflow import (Adasum, Average, Compression, Max, Min, Product, Sum,  # noqa: F401
                              broadcast_object, broadcast_variables, allgather_object,
                              cross_rank, cross_size, cuda_built, gloo_built, gloo_enabled,
                              init, is_initialized, join, local_rank, local_size, mpi_built,
                              mpi_enabled, mpi_threads_supported, nccl_built, rank, shutdown,
                              size, start_timeline, stop_timeline)
from hvrun.tensorflow import allgather as _allgather
from hvrun.tensorflow import allreduce as _allreduce
from hvrun.tensorflow import broadcast as _broadcast
from hvrun.tensorflow.keras import callbacks  # noqa: F401
from hvrun.tensorflow.keras import elastic  # noqa: F401  (KerasState, the commit callbacks)
from hvrun.tensorflow.keras_optimizer import (DistributedOptimizer,  # noqa: F401
                                              _DistributedOptimizer, _wrap)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set,
                                scale_local_gradients=True, local_layers=None):
    """DistributedOptimizer whose `local_layers` (a Keras layer or a list of them) keep their
    trainable weights' gradients to this rank (Horovod's PartialDistributedOptimizer)."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of type keras.layers.Layer")
    wrapped = DistributedOptimizer(optimizer, name=name, device_dense=device_dense,
                                   device_sparse=device_sparse, compression=compression,
                                   sparse_as_dense=sparse_as_dense,
                                   gradient_predivide_factor=gradient_predivide_factor, op=op,
                                   backward_passes_per_step=backward_passes_per_step,
                                   average_aggregated_gradients=average_aggregated_gradients,
                                   groups=groups, process_set=process_set,
                                   scale_local_gradients=scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            wrapped.register_local_var(var)
    return wrapped


def broadcast_global_variables(root_rank):
    """Horovod's Keras helper; in TensorFlow 2 use BroadcastGlobalVariablesCallback."""
    raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution; use "
                       "hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank) or "
                       "hvd.broadcast_variables(model.variables, root_rank)")


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """Reduces a value (tensor, array, number) over every rank; Average by default."""
    return _allreduce(tf.convert_to_tensor(value), name=name, average=average, op=op,
                      prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                      compression=compression)


def allgather(value, name=None):
    return _allgather(tf.convert_to_tensor(value), name=name)


def broadcast(value, root_rank, name=None):
    return _broadcast(tf.convert_to_tensor(value), root_rank, name=name)


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none):
    """keras.models.load_model, with the model's optimizer (and its restored state) averaging
    gradients over every rank again."""
    objects = dict(custom_objects or {})
    for optimizer_class in custom_optimizers or []:
        objects[optimizer_class.__name__] = optimizer_class
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    if getattr(model, "optimizer", None) is not None:
        _wrap(model.optimizer, None, "", "", compression, False, 1.0, Average, 1, False, None,
              global_process_set, in_place=True)
    return model


__all__ = [
    "DistributedOptimizer", "PartialDistributedOptimizer", "load_model", "allreduce",
    "allgather", "broadcast",
    "broadcast_global_variables", "broadcast_variables", "broadcast_object", "allgather_object",
    "callbacks", "elastic", "init", "shutdown", "is_initialized", "size", "rank", "local_size",
    "local_rank",
    "cross_size", "cross_rank", "join", "start_timeline", "stop_timeline", "Compression",
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "gloo_built", "gloo_enabled", "nccl_built", "cuda_built",
]

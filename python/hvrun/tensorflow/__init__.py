"""Horovod's TensorFlow API on hvrun: `import hvrun.tensorflow as hvd` in a horovod.tensorflow
script.

    import tensorflow as tf
    import hvrun.tensorflow as hvd
    hvd.init()
    gpus = tf.config.experimental.list_physical_devices("GPU")
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)

Run it with `hvrun -np N python3 train.py`. Keras: hvrun.tensorflow.keras (or hvrun.keras).
Elastic jobs: hvd.elastic (run, ObjectState, TensorFlowKerasState; docs/elastic.md).
"""
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvrun.tensorflow.collectives import (allreduce, grouped_allreduce,  # noqa: F401
                                          grouped_reducescatter, reducescatter)
from hvrun.tensorflow.compression import Compression  # noqa: F401
from hvrun.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                        broadcast_object_fn, broadcast_variables)
from hvrun.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, ProcessSet,  # noqa: F401
                                      Sum, add_process_set, allgather, alltoall, barrier,
                                      broadcast, broadcast_, ccl_built, cross_rank, cross_size,
                                      cuda_built, ddl_built, gloo_built, gloo_enabled,
                                      global_process_set, grouped_allgather, init,
                                      is_homogeneous, is_initialized, join, local_rank,
                                      local_rank_op, local_size, local_size_op, mark_phase,
                                      mark_step,
                                      mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
                                      process_set_included_op, rank, rank_op,
                                      RefusedArgumentError, remove_process_set,
                                      rocm_built, shutdown, size, size_op, start_timeline,
                                      stop_timeline)
from hvrun.tensorflow.optimizer import DistributedGradientTape, DistributedOptimizer  # noqa: F401
from hvrun.tensorflow import elastic  # noqa: F401,E402  (hvd.elastic.run, TensorFlowKerasState)


def broadcast_global_variables(root_rank):
    """Broadcasts every tf.compat.v1 global variable from root_rank (graph mode only)."""
    import tensorflow as tf
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)

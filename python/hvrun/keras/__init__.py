"""`import hvrun.keras as hvd`: the same module as hvrun.tensorflow.keras (Horovod's
horovod.keras and horovod.tensorflow.keras are one API on TensorFlow 2)."""
from hvrun.tensorflow.keras import *  # noqa: F401,F403
from hvrun.tensorflow.keras import (DistributedOptimizer, allgather, allreduce,  # noqa: F401
                                    broadcast, broadcast_global_variables, callbacks, elastic,
                                    load_model)

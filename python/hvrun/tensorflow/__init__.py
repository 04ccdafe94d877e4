from hvrun.tensorflow.mpi_ops import *  # noqa

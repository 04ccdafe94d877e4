"""The op library's kernel registrations, read back from TensorFlow's kernel registry: every op
has a CPU kernel, and a GPU kernel exactly when hvrun was built with CUDA, with the arguments
TensorFlow must keep in host memory there named so. Registering GPU kernels must leave CPU
tensors on the CPU kernels (checked with a job of size 1). Runs without hvrun, one process."""
import os

import pytest

tf = pytest.importorskip("tensorflow")
from tensorflow.python.framework import kernels, op_def_registry  # noqa: E402

import hvrun.tensorflow as hvd  # noqa: E402
from hvrun.tensorflow.mpi_ops import MPI_LIB  # noqa: E402

# Arguments a GPU kernel keeps on the host: the alltoall's splits (read by the host) and the
# scalars of the ops that have no tensor data.
GPU_HOST_MEMORY = {
    "HvrunAlltoall": {"splits", "received_splits"},
    "HvrunJoin": {"output"},
    "HvrunSize": {"size"},
    "HvrunLocalSize": {"local_size"},
    "HvrunRank": {"rank"},
    "HvrunLocalRank": {"local_rank"},
    "HvrunProcessSetIncluded": {"included"},
}


def op_names():
    """The library's ops, from its generated wrappers (hvrun_grouped_allreduce ->
    HvrunGroupedAllreduce), each checked to be a registered op."""
    names = ["".join(part.capitalize() for part in attr.split("_"))
             for attr in dir(MPI_LIB) if attr.startswith("hvrun_") and not attr.endswith("_eager_fallback")]
    assert len(names) >= 15, names  # 8 collectives, join, barrier and 5 topology ops
    for name in names:
        assert op_def_registry.get(name) is not None, name
    return names


def kernels_of(op_name):
    return {k.device_type: k for k in kernels.get_registered_kernels_for_op(op_name).kernel}


def test_every_op_has_a_cpu_kernel_and_a_gpu_kernel_in_cuda_builds():
    for name in op_names():
        registered = kernels_of(name)
        assert "CPU" in registered, name
        assert ("GPU" in registered) == hvd.cuda_built(), (name, sorted(registered))


@pytest.mark.skipif(not hvd.cuda_built(), reason="this build of hvrun has no CUDA: no GPU kernels")
def test_gpu_kernels_keep_only_the_host_arguments_on_the_host():
    for name in op_names():
        host = set(kernels_of(name)["GPU"].host_memory_arg)
        assert host == GPU_HOST_MEMORY.get(name, set()), name
    assert not list(kernels_of("HvrunAllreduce")["CPU"].host_memory_arg)


def test_cpu_tensors_run_on_the_cpu_kernels():
    if "HVRUN_BIN_DIR" not in os.environ:
        pytest.skip("needs HVRUN_BIN_DIR (the build's bin/) for a job of size 1")
    hvd.init()
    try:
        with tf.device("/cpu:0"):
            x = tf.constant([1.0, 2.0])
            reduced = hvd.allreduce(x, op=hvd.Sum)
            gathered = tf.function(lambda t: hvd.allgather(t))(x)
        assert reduced.device.endswith("CPU:0"), reduced.device
        assert gathered.device.endswith("CPU:0"), gathered.device
        assert reduced.numpy().tolist() == [1.0, 2.0]
        assert gathered.numpy().tolist() == [1.0, 2.0]
    finally:
        hvd.shutdown()

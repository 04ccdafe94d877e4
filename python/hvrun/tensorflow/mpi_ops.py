"""Horovod's TensorFlow ops (horovod.tensorflow.mpi_ops) on hvrun's op library.

The collectives are custom ops (python/tf_ops/, loaded from _hvrun_tf_ops.so) that run eagerly
and inside tf.function graphs; their kernels are asynchronous: they submit to the worker library
and finish when the collective completes, without holding TensorFlow's threads. In builds with
CUDA they have GPU kernels too: a GPU tensor goes through NCCL, ordered on TensorFlow's compute
stream, without host copies (docs/tensorflow.md, "GPU tensors"). A collective is
named after its op, as in Horovod: in a graph, the node's name (unique in the graph, the same on
every rank that builds the same graph); eagerly, '<op>.<name>' when given a name, as hvrun.torch
spells it (_eager_name), else the op's type (eager calls run one at a time).
A failed collective raises the TensorFlow error Horovod's ops raise, from one mapping of the
worker library's status codes (python/tf_ops/kernel_support.h, collective_tf_code):
tf.errors.FailedPreconditionError for metadata that differ between ranks or a collective the
library refused, AbortedError when a peer died or the job aborted, ...; the library's message
names the ranks. Arguments refused before anything runs (a process set this rank is not in)
raise RefusedArgumentError, an InvalidArgumentError (docs/tensorflow.md, "Errors").
"""
import ctypes
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops

from hvrun import _state
from hvrun import basics as _basics
from hvrun._tensors import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from hvrun.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built,  # noqa: F401
                          gloo_built, gloo_enabled, is_homogeneous, is_initialized, local_rank,
                          local_size, mpi_built, mpi_enabled,
                          mpi_threads_supported,
                          nccl_built, placement_local_sizes, rank, rocm_built, set_layout, size,
                          start_timeline,
                          stop_timeline)
from hvrun.numpy_ops import allgather as _numpy_allgather
from hvrun.process_sets import (ProcessSet, add_initial_process_sets,  # noqa: F401
                                add_process_set, check_initial_process_sets, global_process_set,
                                process_set_id, process_set_of_id, process_set_size,
                                remove_process_set, set_global_ranks)

_LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hvrun_tf_ops.so")


def _check_tensorflow_version(built, running):
    """ImportError naming both versions when the op library was built against another TensorFlow
    than the one imported: its kernels use TensorFlow's C++ ABI, which changes between releases,
    so loading it would fail on a missing symbol, or worse, load and misread tensors."""
    if built != running:
        raise ImportError(
            "hvrun.tensorflow: this hvrun's op library (%s) is built against TensorFlow %s, but "
            "TensorFlow %s is installed; install tensorflow==%s (or tensorflow-cpu==%s), or "
            "build hvrun from source against TensorFlow %s (README.md, 'Building from source')"
            % (_LIBRARY_PATH, built, running, built, built, running))


def _load_library():
    if not os.path.exists(_LIBRARY_PATH):
        raise ImportError(
            "hvrun.tensorflow: the op library %s was not built; configure hvrun with the Python "
            "environment that has TensorFlow (HVRUN_WITH_TENSORFLOW=ON says why it is not found)"
            % _LIBRARY_PATH)
    from hvrun.tensorflow._ops_build import TENSORFLOW_VERSION
    _check_tensorflow_version(TENSORFLOW_VERSION, tf.__version__)
    library = tf.load_op_library(_LIBRARY_PATH)
    native = ctypes.CDLL(_LIBRARY_PATH)  # the same loaded library: its attach function
    native.hvrun_tensorflow_attach_worker.argtypes = [ctypes.c_ulonglong]
    native.hvrun_tensorflow_attach_worker.restype = ctypes.c_int
    return library, native


MPI_LIB, _NATIVE = _load_library()

# The collectives' ops are stateful (op_definitions.cc says why). In a tf.function, stateful ops
# run in program order unless listed as asynchronous, as TensorFlow lists its own collectives:
# the collectives of one step must be submitted together to fuse, and a rank must never wait
# for one of its own collectives to finish before submitting the next one its peers wait for.
_COLLECTIVE_OPS = ("HvrunAllreduce", "HvrunGroupedAllreduce", "HvrunAllgather",
                   "HvrunGroupedAllgather", "HvrunBroadcast", "HvrunAlltoall",
                   "HvrunReducescatter", "HvrunGroupedReducescatter")


def _run_collectives_concurrently():
    from tensorflow.python.framework import auto_control_deps
    auto_control_deps.ASYNC_STATEFUL_OPS = frozenset(auto_control_deps.ASYNC_STATEFUL_OPS |
                                                     set(_COLLECTIVE_OPS))


_run_collectives_concurrently()


def _attach(worker):
    _NATIVE.hvrun_tensorflow_attach_worker(worker.address if worker is not None else 0)


_state.add_worker_listener(_attach)


def init(comm=None, process_sets=None):
    """Joins the job hvrun started, then adds Horovod's static `process_sets` in their order
    (ids 1, 2, ...; "dynamic" or None: none). An MPI communicator (`comm`) is refused."""
    check_initial_process_sets(process_sets)
    if comm is not None:
        raise NotImplementedError("hvrun.tensorflow.init: MPI communicators are not supported")
    if not _state.is_initialized():
        _state.init()
        w = _state.worker()
        set_global_ranks(w.size)
        if _state.is_parked_spare():
            # No collective yet: its real layout comes with the init() hvd.elastic.run makes.
            set_layout([w.local_size])
            return
        # Every rank's local size, so is_homogeneous() reports the real host layout: from the
        # coordinator's placement, else gathered.
        local_sizes = placement_local_sizes(w)
        if local_sizes is None:
            local_sizes = _numpy_allgather(np.array([w.local_size], dtype=np.int32),
                                           name="hvrun.init.local_sizes")
        set_layout(local_sizes)
        add_initial_process_sets(process_sets)


def shutdown():
    """Leaves the job; pending collectives fail. init() may follow (every rank the same)."""
    _state.shutdown()
    set_global_ranks(None)


class RefusedArgumentError(tf.errors.InvalidArgumentError, ValueError):
    """A collective's arguments refused before anything runs (a process set this rank is not
    in, or one never added): TensorFlow's InvalidArgumentError, as Horovod's ops raise it, and
    a ValueError, as hvrun.torch raises it. Its constructor is InvalidArgumentError's (node_def,
    op, message), which tf.function's tracing uses to raise it again from the user's code."""


def _set_id(process_set):
    """process_set_id(process_set); its refusal raised as RefusedArgumentError."""
    try:
        return process_set_id(process_set)
    except ValueError as refused:
        raise RefusedArgumentError(None, None, str(refused)) from None


def _executing_eagerly():
    return tf.executing_eagerly()


def _normalize_name(name):
    """Operation names as TensorFlow allows them."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _node_name(prefix, tensor, name):
    """Horovod's rule: a given name, else in a graph '<prefix>_<input's name>'."""
    if name is None and not _executing_eagerly():
        return "%s_%s" % (prefix, _normalize_name(tensor.name))
    return name


def _group_name(prefix, tensors, name):
    """Horovod's rule for grouped ops: a given name, else '<prefix>_<first>_<last>'."""
    if name is None and not _executing_eagerly():
        return _normalize_name("%s_%s_%s" % (prefix, tensors[0].name, tensors[-1].name))
    return name


def _eager_name(kind, name, process_set):
    """The tensor_name attribute of a collective: for a named eager call, the name prefixed with
    its op as hvrun.torch and Horovod's PyTorch binding spell it ('allreduce.m'), since eagerly
    TensorFlow names each kernel after its op type ('HvrunAllreduce') whatever `name` says;
    the coordinator can then tell one name used for two ops on different ranks. Empty (the
    node's name) in a graph, and for unnamed eager calls: their op type is the same on every
    rank (eager calls run one at a time), never looks like '<op>.<name>', and, being constant,
    keeps TensorFlow's eager kernel cache from growing with each call."""
    if name is None or not _executing_eagerly():
        return ""
    return _state.op_name(kind, name, _set_id(process_set))


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """Reduces `tensor` over the ranks of `process_set` (the raw op; see allreduce for Horovod's
    wrapper). Average divides by the set's size (the kernel does)."""
    return MPI_LIB.hvrun_allreduce(tensor, name=_node_name("HorovodAllreduce", tensor, name),
                                   tensor_name=_eager_name("allreduce", name, process_set),
                                   reduce_op=op, prescale_factor=prescale_factor,
                                   postscale_factor=postscale_factor,
                                   ignore_name_scope=ignore_name_scope,
                                   process_set_id=_set_id(process_set))


def _op_set(op):
    """The process set a differentiated op ran on: its gradient runs on the same one."""
    return process_set_of_id(op.get_attr("process_set_id"))


@ops.RegisterGradient("HvrunAllreduce")
def _allreduce_grad(op, grad):
    """The gradient of an allreduce is the allreduce of the gradient, with the same op."""
    return _allreduce(grad, op=op.get_attr("reduce_op"),
                      prescale_factor=op.get_attr("prescale_factor"),
                      postscale_factor=op.get_attr("postscale_factor"),
                      ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=_op_set(op))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """Reduces every tensor of `tensors` (one dtype) in one negotiation."""
    return MPI_LIB.hvrun_grouped_allreduce(list(tensors),
                                           name=_group_name("HorovodGroupedAllreduce", tensors, name),
                                           tensor_name=_eager_name("grouped_allreduce", name,
                                                                   process_set),
                                           reduce_op=op,
                                           prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor,
                                           ignore_name_scope=ignore_name_scope,
                                           process_set_id=_set_id(process_set))


@ops.RegisterGradient("HvrunGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    return _grouped_allreduce(list(grads), op=op.get_attr("reduce_op"),
                              prescale_factor=op.get_attr("prescale_factor"),
                              postscale_factor=op.get_attr("postscale_factor"),
                              ignore_name_scope=op.get_attr("ignore_name_scope"),
                              process_set=_op_set(op))


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every member's `tensor` along dimension 0 (which may differ between ranks),
    in rank order."""
    return MPI_LIB.hvrun_allgather(tensor, name=_node_name("HorovodAllgather", tensor, name),
                                   tensor_name=_eager_name("allgather", name, process_set),
                                   ignore_name_scope=ignore_name_scope,
                                   process_set_id=_set_id(process_set))


def _own_rows(grad, inputs, ignore_name_scope, process_set):
    """This rank's rows of the averaged gradient of a concatenation of every member's inputs."""
    members = process_set_size(process_set)
    with tf.device("/cpu:0"):
        splits = []
        for x in inputs:
            rows = tf.reshape(tf.shape(x)[0], [1])
            splits.append(tf.reshape(allgather(rows, ignore_name_scope=ignore_name_scope,
                                               process_set=process_set), [members]))
    me = rank() if process_set is global_process_set else process_set.rank()
    return [tf.split(g, num_or_size_splits=s, axis=0)[me] for g, s in zip(grad, splits)]


@ops.RegisterGradient("HvrunAllgather")
def _allgather_grad(op, grad):
    """Horovod's rule: average the gradient over the set's ranks, keep this rank's rows."""
    ignore = op.get_attr("ignore_name_scope")
    process_set = _op_set(op)
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=process_set)
    return _own_rows([grad], [op.inputs[0]], ignore, process_set)[0]


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=global_process_set):
    """allgather of every tensor of `tensors` (one dtype) in one op."""
    return MPI_LIB.hvrun_grouped_allgather(list(tensors),
                                           name=_group_name("HorovodGroupedAllgather", tensors, name),
                                           tensor_name=_eager_name("grouped_allgather", name,
                                                                   process_set),
                                           ignore_name_scope=ignore_name_scope,
                                           process_set_id=_set_id(process_set))


@ops.RegisterGradient("HvrunGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    ignore = op.get_attr("ignore_name_scope")
    process_set = _op_set(op)
    # One allreduce per gradient: TensorFlow may hand zero gradients of another dtype.
    grads = [_allreduce(g, op=Average, ignore_name_scope=ignore, process_set=process_set)
             for g in grads]
    return _own_rows(grads, list(op.inputs), ignore, process_set)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set):
    """root_rank's `tensor` on every member of `process_set` (root_rank: a job rank, a member)."""
    return MPI_LIB.hvrun_broadcast(tensor, name=_node_name("HorovodBroadcast", tensor, name),
                                   tensor_name=_eager_name("broadcast", name, process_set),
                                   root_rank=root_rank, ignore_name_scope=ignore_name_scope,
                                   process_set_id=_set_id(process_set))


@ops.RegisterGradient("HvrunBroadcast")
def _broadcast_grad(op, grad):
    """Horovod's rule: the averaged gradient on the root, zero elsewhere."""
    reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr("ignore_name_scope"),
                         process_set=_op_set(op))
    if rank() != op.get_attr("root_rank"):
        return reduced * 0
    return reduced


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root_rank's values to `variables` (resource or reference variables) in place;
    returns their new values. In a graph the returned tensors depend on the assignments, so
    running them (a v1 Session's run, or a tf.function returning them) assigns the variables;
    a tf.function assigns them in any case (its stateful ops all run)."""
    prefix = name or "HorovodBroadcastInplace"
    values = []
    for var in variables:
        # Eagerly an unnamed call stays unnamed: variables' names may differ between ranks.
        node = (None if name is None and _executing_eagerly()
                else _normalize_name("%s_%s" % (prefix, var.name)))
        value = broadcast(var, root_rank, name=node, ignore_name_scope=True,
                          process_set=process_set)
        assigned = var.assign(value)
        if _executing_eagerly():
            values.append(value)
            continue
        # A graph runs only what is fetched: the value is read after its assignment.
        with tf.control_dependencies([assigned]):
            values.append(tf.identity(value))
    return values


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Sends splits[r] rows of `tensor` to the set's r-th member (an even split over the set's
    members when None) and concatenates what every member sent here. Returns (output,
    received_splits) when splits is given."""
    splits_ = (tf.convert_to_tensor(splits, dtype=tf.int32) if splits is not None
               else tf.constant([], dtype=tf.int32))
    output, received = MPI_LIB.hvrun_alltoall(tensor, splits=splits_,
                                              name=_node_name("HorovodAlltoall", tensor, name),
                                              tensor_name=_eager_name("alltoall", name, process_set),
                                              ignore_name_scope=ignore_name_scope,
                                              process_set_id=_set_id(process_set))
    return (output, received) if splits is not None else output


@ops.RegisterGradient("HvrunAlltoall")
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    """The rows travel back: an alltoall of the gradient with the received splits."""
    grad, _ = alltoall(grad_wrt_output, splits=op.outputs[1],
                       ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=_op_set(op))
    return [grad, None]


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over the set's ranks and keeps this rank's share of dimension 0."""
    return MPI_LIB.hvrun_reducescatter(tensor, name=_node_name("HorovodReducescatter", tensor, name),
                                       tensor_name=_eager_name("reducescatter", name, process_set),
                                       reduce_op=op, ignore_name_scope=ignore_name_scope,
                                       prescale_factor=prescale_factor,
                                       postscale_factor=postscale_factor,
                                       process_set_id=_set_id(process_set))


def _scattered_grad(op, grads):
    """Horovod's rule: scale as the reduction did, gather every member's share."""
    process_set = _op_set(op)
    factor = 1.0
    if op.get_attr("reduce_op") == Sum:
        factor *= process_set_size(process_set)
    factor *= op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    ignore = op.get_attr("ignore_name_scope")
    return [allgather(g * factor if factor != 1.0 else g, ignore_name_scope=ignore,
                      process_set=process_set) for g in grads]


@ops.RegisterGradient("HvrunReducescatter")
def _reducescatter_grad(op, grad):
    return _scattered_grad(op, [grad])[0]


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    return MPI_LIB.hvrun_grouped_reducescatter(list(tensors),
                                               name=_group_name("HorovodGroupedReducescatter",
                                                                tensors, name),
                                               tensor_name=_eager_name("grouped_reducescatter",
                                                                       name, process_set),
                                               reduce_op=op,
                                               ignore_name_scope=ignore_name_scope,
                                               prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor,
                                               process_set_id=_set_id(process_set))


@ops.RegisterGradient("HvrunGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    return _scattered_grad(op, list(grads))


def mark_step():
    """One training step done on this rank (straggler attribution; not in Horovod). Inside a
    tf.function it is an op that marks the step each time the graph runs, in program order with
    the other stateful ops; the collectives are not ordered, so make it depend on the step's
    results (tf.control_dependencies) for the step to end after them."""
    if _executing_eagerly():
        return _basics.mark_step()
    return MPI_LIB.hvrun_mark_step()


def mark_phase(name):
    """Phase `name` of this step starts now on this rank ("data", "forward", ...), ending the one
    before ("" ends it); inside a tf.function, an op as mark_step() is."""
    if _executing_eagerly():
        return _basics.mark_phase(name)
    return MPI_LIB.hvrun_mark_phase(phase=str(name))


def join():
    """This rank has no more data: returns (as a scalar tensor) the last rank to join, once
    every rank joined. Other ranks' collectives meanwhile get neutral values from this one."""
    return MPI_LIB.hvrun_join()


def barrier(process_set=global_process_set):
    """Returns once every member of `process_set` called barrier()."""
    return MPI_LIB.hvrun_barrier(process_set_id=_set_id(process_set))


def size_op(process_set_id=0, name=None):
    """The number of ranks of the process set, read when the graph runs."""
    return MPI_LIB.hvrun_size(process_set_id=process_set_id, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is in the process set (always, for the global set), else 0."""
    return MPI_LIB.hvrun_process_set_included(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    return MPI_LIB.hvrun_local_size(name=name)


def rank_op(name=None):
    return MPI_LIB.hvrun_rank(name=name)


def local_rank_op(name=None):
    return MPI_LIB.hvrun_local_rank(name=name)


for _op_type in ("HvrunJoin", "HvrunBarrier", "HvrunSize", "HvrunProcessSetIncluded",
                 "HvrunLocalSize", "HvrunRank", "HvrunLocalRank"):
    ops.NotDifferentiable(_op_type)


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated `average` argument beside `op` (default Average)."""
    from hvrun._tensors import resolve_op
    return resolve_op(op, average)

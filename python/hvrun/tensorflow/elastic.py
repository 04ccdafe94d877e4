"""Horovod's elastic API for TensorFlow (horovod.tensorflow.elastic) on hvrun.

    import hvrun.tensorflow as hvd
    hvd.init()
    model = ...                                   # built (it has its weights)
    optimizer = keras.optimizers.SGD(0.01)
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, step=0)

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for state.step in range(state.step, steps):
                ...a step with hvd.DistributedGradientTape...
                if state.step % 10 == 9:
                    state.commit()
            state.epoch, state.step = state.epoch + 1, 0
            state.commit()

    train(state)

Keras trainers that use model.fit: hvrun.tensorflow.keras.elastic (KerasState and the
callbacks that update and commit it). Run it as an elastic job (hvrun --min-np / --max-np /
--host-discovery-script); elsewhere run() calls the function once and lets its errors through.
A reset calls hvd.shutdown() and hvd.init() without arguments: process sets given to the first
init() are not added again.

TensorFlow reports a failed collective as its own error class (tf.errors.UnavailableError,
AbortedError, ... carrying hvrun's status code; inside a tf.function TensorFlow turns some of
them into InternalError). run() and the states' collectives turn those of hvrun's ops into
HorovodInternalError, which is what hvrun.elastic's loop resets on; errors of other TensorFlow
ops, and errors of the program (INVALID_ARGUMENT: tensors whose shapes differ between ranks,
...), are raised unchanged.
"""
import contextlib
import functools
import re

import numpy as np
import tensorflow as tf

from hvrun import elastic as _elastic
from hvrun.elastic import State, is_elastic, run_fn  # noqa: F401  (State: Horovod's name here)
from hvrun.exceptions import STATUS_NAMES, HorovodInternalError
from hvrun.tensorflow.collectives import allreduce
from hvrun.tensorflow.functions import broadcast_object, broadcast_variables
from hvrun.tensorflow.mpi_ops import Max

# ---- TensorFlow errors of hvrun's collectives

# What only an error of one of hvrun's ops says: eagerly TensorFlow names the op type; in a
# graph the message carries the stack where the failing node was made, whose innermost frame is
# the op's generated wrapper (hvrun_allreduce, ...); the default node names are Horovod's; and
# the worker library's own words for a job or membership that ended.
_HVRUN_OP_MARKS = re.compile(
    r"\[Op:Hvrun\w*\]|__wrapped__Hvrun|\bin hvrun_(?:grouped_)?(?:allreduce|allgather|broadcast|"
    r"alltoall|reducescatter|join|barrier)\b|\{\{node [^}]*Horovod(?:Grouped)?(?:Allreduce|"
    r"Allgather|Broadcast|Alltoall|Reducescatter)|the job's membership changed|job aborted: ")
# Inside a tf.function TensorFlow hides UNAVAILABLE and ABORTED behind INTERNAL (it keeps those
# codes for its own distributed runtime) but says what the op returned.
_REPLACED_CODE = re.compile(r"originally returned (\w+?)Error")
_ERROR_CLASS_CODES = {
    "Cancelled": "CANCELLED", "Unknown": "UNKNOWN", "InvalidArgument": "INVALID_ARGUMENT",
    "DeadlineExceeded": "DEADLINE_EXCEEDED", "NotFound": "NOT_FOUND",
    "AlreadyExists": "ALREADY_EXISTS", "PermissionDenied": "PERMISSION_DENIED",
    "ResourceExhausted": "RESOURCE_EXHAUSTED", "FailedPrecondition": "FAILED_PRECONDITION",
    "Aborted": "ABORTED", "OutOfRange": "OUT_OF_RANGE", "Unimplemented": "UNIMPLEMENTED",
    "Internal": "INTERNAL", "Unavailable": "UNAVAILABLE", "DataLoss": "DATA_LOSS",
    "Unauthenticated": "UNAUTHENTICATED",
}


def collective_error(error):
    """The HorovodInternalError that a tf.errors.OpError of one of hvrun's collectives stands
    for (`code`: the worker library's status code name), or None for any other error."""
    if not isinstance(error, tf.errors.OpError):
        return None
    message = str(error.message if getattr(error, "message", None) else error)
    if not _HVRUN_OP_MARKS.search(message):
        return None
    replaced = _REPLACED_CODE.search(message)
    if replaced and replaced.group(1) in _ERROR_CLASS_CODES:
        code = _ERROR_CLASS_CODES[replaced.group(1)]
    else:
        code = STATUS_NAMES.get(error.error_code, str(error.error_code))
    return HorovodInternalError(message, code)


@contextlib.contextmanager
def _collective_errors():
    """Raises a failed hvrun collective's TensorFlow error as HorovodInternalError, in an elastic
    job only: elsewhere nothing resets, and the trainer sees the error it would without the
    elastic API."""
    try:
        yield
    except tf.errors.OpError as e:
        translated = collective_error(e) if is_elastic() else None
        if translated is None or translated.code in _elastic._NOT_RESET_FOR:
            raise
        raise translated from e


def _with_collective_errors(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _collective_errors():
            return method(*args, **kwargs)
    return wrapper


# ---- the collectives of the states

def _any_rank(flag):
    total = allreduce(tf.constant([1 if flag else 0], dtype=tf.int32), op=Max,
                      name=_elastic.HOSTS_UPDATED_NAME)
    return int(total.numpy()[0]) != 0


def _host_copy(values):
    """Copies in host memory that share nothing with TensorFlow's buffers (numpy() of a CPU
    tensor may be a view of it)."""
    return [np.array(v, copy=True) for v in values]


def _optimizer_variables(optimizer):
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _assign_all(variables, saved, what):
    if not saved:
        return  # nothing was saved (see TensorFlowKerasState): keep the current values
    if len(variables) != len(saved):
        raise ValueError("%s: %d variables now, %d saved at the last commit" %
                         (what, len(variables), len(saved)))
    # Fresh copies: TensorFlow may keep an assigned array's buffer as the variable's, and the
    # next step would then write into what the state saved.
    for variable, value in zip(variables, _host_copy(saved)):
        variable.assign(value)


class ObjectState(_elastic.ObjectState):
    """Plain attributes kept across resets (see hvrun.elastic.ObjectState), synced with
    hvrun.tensorflow's broadcast_object: hvd.elastic.ObjectState(epoch=0, batch=0)."""

    def __init__(self, **kwargs):
        super().__init__(bcast_object=broadcast_object, any_rank=_any_rank, **kwargs)

    check_host_updates = _with_collective_errors(_elastic.ObjectState.check_host_updates)
    sync = _with_collective_errors(_elastic.ObjectState.sync)


class TensorFlowState(ObjectState):
    """Horovod's TensorFlowState for eager TensorFlow: a list of tf.Variables (`variables`)
    and plain attributes. save() keeps host copies of the variables' values, restore() assigns
    them back, sync() assigns rank 0's values everywhere. `session` (TensorFlow 1 graphs) is
    refused: hvrun's elastic state runs eagerly."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None or not tf.executing_eagerly():
            raise ValueError("hvrun.tensorflow.elastic.TensorFlowState needs eager execution "
                             "(TensorFlow 2); graph sessions are not supported")
        self.variables = list(variables or [])
        self._saved_variables = _host_copy(v.numpy() for v in self.variables)
        super().__init__(**kwargs)

    def save(self):
        self._saved_variables = _host_copy(v.numpy() for v in self.variables)
        super().save()

    def restore(self):
        _assign_all(self.variables, self._saved_variables, "TensorFlowState")
        super().restore()

    @_with_collective_errors
    def sync(self):
        broadcast_variables(self.variables, root_rank=0)
        super().sync()  # the plain attributes, then save() of everything


class TensorFlowKerasState(ObjectState):
    """Horovod's TensorFlowKerasState: a Keras model, its optimizer and plain attributes.

        state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)

    save() (commit()) keeps host copies of model.get_weights() and of the optimizer's
    variables (its slots, iteration count, learning rate); restore() assigns copies of them
    back; sync() broadcasts rank 0's model weights and optimizer variables, then its plain
    attributes, then saves. `optimizer` defaults to model.optimizer (a compiled model's).

    A Keras 3 optimizer makes its variables on its first step. When the state saves or syncs
    a built model whose optimizer is not built yet, it builds it for model.trainable_variables
    (what that first step would do; the new slots start at zero), so that every commit has the
    optimizer's whole state and a rank that just joined has the same variables to receive as
    the others. Build the model (an Input, or a call) before making the state: the weights of
    an unbuilt model do not exist yet, and nothing of them is saved. `backend` is Horovod's
    (the Keras backend module); hvrun's state runs eagerly and does not need it. Assigning
    state.model or state.optimizer makes the state keep the new object."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not tf.executing_eagerly():
            raise ValueError("hvrun.tensorflow.elastic.TensorFlowKerasState needs eager "
                             "execution (TensorFlow 2)")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self.backend = backend
        self._save_model()
        super().__init__(**kwargs)

    def _build_optimizer(self):
        optimizer = self.optimizer
        if optimizer is None or getattr(optimizer, "built", True):
            return
        trainable = list(self.model.trainable_variables)
        if trainable:
            optimizer.build(trainable)

    def _save_model(self):
        self._saved_model_state = _host_copy(self.model.get_weights())
        self._saved_optimizer_state = []
        if self.optimizer is not None:
            self._build_optimizer()
            self._saved_optimizer_state = _host_copy(
                v.numpy() for v in _optimizer_variables(self.optimizer))

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        if self._saved_model_state:
            if len(self.model.weights) != len(self._saved_model_state):
                raise ValueError("TensorFlowKerasState: the model has %d weights now, %d saved at "
                                 "the last commit" % (len(self.model.weights),
                                                      len(self._saved_model_state)))
            self.model.set_weights(_host_copy(self._saved_model_state))
        if self.optimizer is not None:
            _assign_all(_optimizer_variables(self.optimizer), self._saved_optimizer_state,
                        "TensorFlowKerasState's optimizer")
        super().restore()

    @_with_collective_errors
    def sync(self):
        broadcast_variables(self.model.weights, root_rank=0)
        if self.optimizer is not None:
            self._build_optimizer()
            broadcast_variables(_optimizer_variables(self.optimizer), root_rank=0)
        super().sync()  # the plain attributes, then save() of everything


def _reset():
    # hvrun.tensorflow's own shutdown/init: they also refresh the global process set and the
    # host layout that hvd.is_homogeneous() reports.
    from hvrun.tensorflow.mpi_ops import init, shutdown
    shutdown()
    init()


def run(func):
    """Decorator for the training function `func(state, *args, **kwargs)` (Horovod's
    hvd.elastic.run). In an elastic job (HVRUN_ELASTIC=1) it syncs the state, calls `func`,
    and when one of hvrun's collectives fails (a peer died or the membership changed: the
    TensorFlow error becomes HorovodInternalError) restores the state to its last commit; when
    hosts were added (HostsUpdatedInterrupt, raised by state.commit() on every rank) it keeps
    the state. Either way it then leaves and rejoins the job (hvd.shutdown(); hvd.init(), which
    waits for the new membership: rank and size may change), calls state.on_reset() (the reset
    callbacks), syncs again and calls `func` again. Errors of the program itself
    (INVALID_ARGUMENT, ...) and of other TensorFlow ops are raised. Outside an elastic job
    `func` runs once after state.sync() and its errors propagate unchanged."""

    @functools.wraps(func)
    def translated(state, *args, **kwargs):
        with _collective_errors():
            return func(state, *args, **kwargs)

    return run_fn(translated, _reset)


__all__ = ["run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState",
           "is_elastic", "collective_error"]

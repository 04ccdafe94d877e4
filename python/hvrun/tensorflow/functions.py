"""Variables and Python objects across ranks, as horovod.tensorflow.functions."""
import numpy as np
import tensorflow as tf

from hvrun import _object_wire
from hvrun.basics import rank
from hvrun.process_sets import global_process_set
from hvrun.tensorflow.mpi_ops import _executing_eagerly, allgather, broadcast


def _broadcast_group(variables, root_rank, process_set):
    return [var.assign(broadcast(var, root_rank, process_set=process_set)) for var in variables]


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to every variable of `variables`.

    Eagerly the broadcasts run in one tf.function, so they are submitted together and fuse;
    in a graph this returns the grouped assign op. `inplace` is accepted (the values are
    assigned in place either way)."""
    del inplace
    variables = list(variables)
    if _executing_eagerly():
        if not variables:
            return None
        tf.function(lambda: _broadcast_group(variables, root_rank, process_set))()
        return None
    return tf.group(*_broadcast_group(variables, root_rank, process_set))


def _to_numpy(value, session):
    if _executing_eagerly():
        return value.numpy()
    return (session or tf.compat.v1.get_default_session()).run(value)


def _object_name(obj, name):
    """Horovod's default name, the object's type, in a graph; eagerly an unnamed call stays
    unnamed: named eager calls reach the coordinator under their name, and the type may differ
    between ranks (None on the ranks that receive a broadcast)."""
    if name is not None or _executing_eagerly():
        return name
    return type(obj).__name__


def _part(name, suffix):
    return None if name is None else name + suffix


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's `obj` (pickled there) on every member of `process_set`: one collective, an
    allgather to which only root_rank contributes."""
    name = _object_name(obj, name)
    is_root = rank() == root_rank
    payload = np.frombuffer(_object_wire.dumps(obj) if is_root else b"", dtype=np.uint8)
    data = _to_numpy(allgather(tf.constant(payload, dtype=tf.uint8), name=_part(name, ".obj"),
                               process_set=process_set), session)
    return obj if is_root else _object_wire.loads(data.tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts an object from root_rank (Horovod's TF1 helper)."""
    def _bcast(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every member's `obj`, in rank order (one collective)."""
    name = _object_name(obj, name)
    payload = np.frombuffer(_object_wire.framed(obj), dtype=np.uint8)
    data = _to_numpy(allgather(tf.constant(payload, dtype=tf.uint8), name=_part(name, ".obj"),
                               process_set=process_set), session)
    return _object_wire.unframed(data.tobytes())


__all__ = ["broadcast_variables", "broadcast_object", "broadcast_object_fn", "allgather_object"]

"""Variables and Python objects across ranks, as horovod.tensorflow.functions."""
import pickle

import numpy as np
import tensorflow as tf

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
    """root_rank's `obj` (pickled there) on every member of `process_set`."""
    name = _object_name(obj, name)
    if rank() == root_rank:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        length = tf.constant([payload.size], dtype=tf.int32)
        _to_numpy(broadcast(length, root_rank, name=_part(name, ".sz"), process_set=process_set), session)
        _to_numpy(broadcast(tf.constant(payload), root_rank, name=_part(name, ".t"),
                            process_set=process_set), session)
        return obj
    length = _to_numpy(broadcast(tf.constant([0], dtype=tf.int32), root_rank, name=_part(name, ".sz"),
                                 process_set=process_set), session)
    data = _to_numpy(broadcast(tf.zeros([int(length[0])], dtype=tf.uint8), root_rank,
                               name=_part(name, ".t"), process_set=process_set), session)
    return pickle.loads(data.tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts an object from root_rank (Horovod's TF1 helper)."""
    def _bcast(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every member's `obj`, in rank order."""
    name = _object_name(obj, name)
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = _to_numpy(allgather(tf.constant([payload.size], dtype=tf.int32), name=_part(name, ".sz"),
                                  process_set=process_set), session)
    gathered = _to_numpy(allgather(tf.constant(payload), name=_part(name, ".t"),
                                   process_set=process_set), session).tobytes()
    objects, offset = [], 0
    for n in lengths.tolist():
        objects.append(pickle.loads(gathered[offset:offset + n]))
        offset += n
    return objects


__all__ = ["broadcast_variables", "broadcast_object", "broadcast_object_fn", "allgather_object"]

"""Python objects through one allgather, for every framework's broadcast_object and
allgather_object.

A broadcast of an object whose size the receivers do not know would take two collectives (the
length, then the bytes), each negotiated on its own. An allgather takes contributions of any
length, so one is enough: for a broadcast only the root contributes (the others give nothing and
receive the root's bytes); for a gather every rank's bytes carry their length in front, so the
concatenation splits back into one object per rank."""
import pickle
import struct

try:
    import cloudpickle as _pickler  # lambdas and locally defined classes travel too
except ImportError:  # hvrun without its Python extras: plain pickle
    _pickler = pickle

_LENGTH = struct.Struct("<Q")


def dumps(obj):
    return _pickler.dumps(obj)


def loads(data):
    return pickle.loads(data)


def framed(obj):
    """obj pickled, its length in front: one rank's part of an object allgather."""
    payload = _pickler.dumps(obj)
    return _LENGTH.pack(len(payload)) + payload


def unframed(data):
    """The objects of an allgather of framed() parts, in rank order."""
    view = memoryview(data)
    objects, offset = [], 0
    while offset < len(view):
        (n,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        objects.append(pickle.loads(view[offset:offset + n]))
        offset += n
    return objects

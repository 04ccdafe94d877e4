"""Codes the extension speaks: hvrun's DataType and ReduceOp values (hvrun/types.h)."""
import numpy as np

UINT8, INT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, INT16 = 1, 2, 3, 4, 5, 6, 7, 8, 9

NUMPY_DTYPES = {
    np.dtype(np.uint8): UINT8,
    np.dtype(np.int8): INT8,
    np.dtype(np.int16): INT16,
    np.dtype(np.int32): INT32,
    np.dtype(np.int64): INT64,
    np.dtype(np.float16): FLOAT16,
    np.dtype(np.float32): FLOAT32,
    np.dtype(np.float64): FLOAT64,
}

# ReduceOp values of the worker library.
CORE_SUM, CORE_AVERAGE, CORE_MIN, CORE_MAX, CORE_PRODUCT = 1, 2, 3, 4, 5

# Horovod's public op constants (horovod.common.basics), so code comparing them keeps working.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5

_TO_CORE = {Average: CORE_AVERAGE, Sum: CORE_SUM, Min: CORE_MIN, Max: CORE_MAX, Product: CORE_PRODUCT}
OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
            Product: "Product"}


def op_name(op):
    """'Adasum' for Horovod's constant 2, ...; repr() of anything else."""
    try:
        return OP_NAMES[op]
    except (KeyError, TypeError):
        return repr(op)


def core_op(op):
    """The worker library's ReduceOp for one of Horovod's op constants."""
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum; use Average or Sum")
    try:
        return _TO_CORE[op]
    except (KeyError, TypeError):
        raise ValueError("unknown reduce op %r; use Average, Sum, Min, Max or Product" % (op,))


def resolve_op(op, average, default=Average):
    """Horovod's rule for the deprecated `average` argument beside `op`."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        return Average if average else Sum
    return default if op is None else op

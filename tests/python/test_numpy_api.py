"""The plain `hvrun` package on NumPy arrays, checked against NumPy references."""
import numpy as np
import pytest

import hvrun
from conftest import data

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


def ranks():
    return hvrun.rank(), hvrun.size()


def test_topology():
    r, n = ranks()
    assert 0 <= r < n and n >= 2
    assert hvrun.local_size() == n and hvrun.local_rank() == r
    assert hvrun.cross_size() == 1 and hvrun.cross_rank() == 0
    assert hvrun.job_id()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [hvrun.Sum, hvrun.Min, hvrun.Max, hvrun.Product])
def test_allreduce(dtype, op):
    r, n = ranks()
    inputs = [data(i, (3, 5), dtype, seed=op) for i in range(n)]
    reference = {hvrun.Sum: np.sum, hvrun.Min: np.min, hvrun.Max: np.max,
                 hvrun.Product: np.prod}[op](np.stack(inputs), axis=0).astype(dtype)
    mine = inputs[r].copy()
    out = hvrun.allreduce(mine, op=op)
    assert out.dtype == np.dtype(dtype) and out.shape == (3, 5)
    np.testing.assert_array_equal(out, reference)
    np.testing.assert_array_equal(mine, inputs[r])  # out of place: input untouched
    assert hvrun.allreduce_(mine, op=op) is mine
    np.testing.assert_array_equal(mine, reference)


def test_allreduce_average_and_scaling():
    r, n = ranks()
    x = np.full(7, float(r + 1), np.float64)
    np.testing.assert_allclose(hvrun.allreduce(x), np.full(7, (n + 1) / 2))
    scaled = hvrun.allreduce(x, op=hvrun.Sum, prescale_factor=2.0, postscale_factor=0.5)
    np.testing.assert_allclose(scaled, np.full(7, n * (n + 1) / 2))


def test_named_blocking_allreduce_repeated_stays_correct():
    # The second call on of a name may run on the fast path (no coordinator): same results.
    r, n = ranks()
    for i in range(200):
        x = np.full(3, float(r + i), np.float32)
        assert hvrun.allreduce_(x, op=hvrun.Sum, name="np.loss") is x
        np.testing.assert_array_equal(x, np.full(3, n * i + n * (n - 1) / 2, np.float32))
        y = hvrun.allreduce(np.full(2, r + 1, np.int64), op=hvrun.Max, name="np.max")
        np.testing.assert_array_equal(y, np.full(2, n, np.int64))


def test_allreduce_async_overlaps():
    r, n = ranks()
    arrays = [np.full(4, float(i + r), np.float32) for i in range(5)]
    handles = [hvrun.allreduce_async(a, op=hvrun.Sum, name="np.async.%d" % i)
               for i, a in enumerate(arrays)]
    for i, h in enumerate(handles):
        np.testing.assert_array_equal(h.wait(), np.full(4, n * i + n * (n - 1) / 2, np.float32))


def test_allgather_uneven_rows():
    r, n = ranks()
    out = hvrun.allgather(np.full((r + 1, 2), r, np.int32))
    expected = np.concatenate([np.full((i + 1, 2), i, np.int32) for i in range(n)])
    np.testing.assert_array_equal(out, expected)


def test_broadcast():
    r, n = ranks()
    root = n - 1
    x = data(r, (4, 3), np.float32)
    out = hvrun.broadcast(x, root)
    np.testing.assert_array_equal(out, data(root, (4, 3), np.float32))
    np.testing.assert_array_equal(x, data(r, (4, 3), np.float32))
    hvrun.broadcast_(x, 0)
    np.testing.assert_array_equal(x, data(0, (4, 3), np.float32))


def test_alltoall_with_splits():
    r, n = ranks()
    splits = [(r + d) % 2 + 1 for d in range(n)]  # rows sent to rank d
    rows = np.concatenate([np.full((splits[d], 2), 100 * r + d, np.int64) for d in range(n)])
    out, received = hvrun.alltoall(rows, splits)
    expected_splits = [(s + r) % 2 + 1 for s in range(n)]
    np.testing.assert_array_equal(received, expected_splits)
    expected = np.concatenate([np.full((expected_splits[s], 2), 100 * s + r, np.int64)
                               for s in range(n)])
    np.testing.assert_array_equal(out, expected)


def test_reducescatter():
    r, n = ranks()
    rows = 2 * n + 1
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) * (r + 1)
    out = hvrun.reducescatter(x, op=hvrun.Sum)
    total = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) * (n * (n + 1) / 2)
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(counts[:r])
    np.testing.assert_array_equal(out, total[start:start + counts[r]])


def test_bad_arguments_raise_before_submission():
    with pytest.raises(TypeError):
        hvrun.allreduce(np.ones(3, dtype=np.complex64))
    with pytest.raises(ValueError):
        hvrun.allreduce(np.ones((4, 4), np.float32)[:, ::2])


def test_barrier():
    for _ in range(3):
        hvrun.barrier()

"""hvrun.torch against references: every collective of Horovod's torch API, its dtypes,
shapes, in-place and asynchronous variants, join with uneven batches, and mismatches raising
HorovodInternalError on every rank."""
import os
import shutil
import tempfile
import time

import numpy as np
import pytest
import torch

import hvrun.torch as hvd
from conftest import data
from hvrun.exceptions import HvrunError

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]


def ranks():
    return hvd.rank(), hvd.size()


def tensor(rank, shape, dtype, seed=0):
    return torch.from_numpy(data(rank, shape, np.int64, seed)).to(dtype)


def test_basics():
    r, n = ranks()
    assert hvd.is_initialized()
    assert (hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()) == (r, n, 0, 1)
    assert hvd.gloo_built() and hvd.gloo_enabled()
    assert not hvd.mpi_enabled() and not hvd.mpi_built()
    assert hvd.nccl_built() == 0 or hvd.cuda_built()
    assert not hvd.rocm_built() and not hvd.ddl_built() and not hvd.ccl_built()
    assert hvd.is_homogeneous()
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Min, hvd.Max, hvd.Product])
def test_allreduce_ops(dtype, op):
    r, n = ranks()
    inputs = [tensor(i, (2, 3, 4), dtype, seed=op) for i in range(n)]
    stacked = torch.stack([t.double() for t in inputs])
    reference = {hvd.Sum: lambda s: s.sum(0), hvd.Min: lambda s: s.min(0).values,
                 hvd.Max: lambda s: s.max(0).values, hvd.Product: lambda s: s.prod(0)}[op](stacked)
    mine = inputs[r].clone()
    out = hvd.allreduce(mine, op=op)
    assert out.dtype == dtype and out.shape == (2, 3, 4)
    assert torch.equal(out.double(), reference)
    assert torch.equal(mine, inputs[r])
    assert hvd.allreduce_(mine, op=op) is mine
    assert torch.equal(mine.double(), reference)


def test_allreduce_average_default_and_average_argument():
    r, n = ranks()
    x = torch.full((5,), float(r + 1))
    assert torch.allclose(hvd.allreduce(x), torch.full((5,), (n + 1) / 2))
    assert torch.allclose(hvd.allreduce(x, average=False), torch.full((5,), n * (n + 1) / 2))
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    with pytest.raises(NotImplementedError):
        hvd.allreduce(x, op=hvd.Adasum)


def test_allreduce_scale_factors_and_fp16_compression():
    r, n = ranks()
    x = torch.full((6,), float(r + 1), dtype=torch.float32)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    assert torch.allclose(out, torch.full((6,), 2.0 * n * (n + 1) / 2))
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32
    assert torch.allclose(out, torch.full((6,), n * (n + 1) / 2))


def test_allreduce_non_contiguous_in_place():
    r, n = ranks()
    base = torch.zeros(4, 6)
    view = base[:, ::2]
    view.fill_(r + 1)
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(base[:, ::2], torch.full((4, 3), n * (n + 1) / 2))
    assert torch.equal(base[:, 1::2], torch.zeros(4, 3))


def test_named_in_place_allreduce_repeated_on_cpu_stays_correct():
    # Named and repeated: may run on the fast path (no coordinator), non-contiguous included.
    r, n = ranks()
    base = torch.zeros(2, 4)
    for i in range(100):
        loss = torch.tensor([float(r + i)])
        assert hvd.allreduce_(loss, op=hvd.Average, name="torch.loss") is loss
        assert loss.item() == i + (n - 1) / 2
        view = base[:, ::2]
        view.fill_(r + i)
        hvd.allreduce_(view, op=hvd.Sum, name="torch.view")
        assert torch.equal(base[:, ::2], torch.full((2, 2), float(n * i + n * (n - 1) / 2)))


def test_repeated_async_in_place_calls_take_every_argument_form():
    # The second and later calls of a name take the C steady state; what it does not take
    # (another op, a scale, a non-contiguous tensor, average=, bad arguments) goes to the Python
    # function, with the same results and errors.
    r, n = ranks()
    for i in range(4):
        x = torch.full((3,), float(r + i))
        assert hvd.synchronize(hvd.allreduce_async_(x, name="steady", op=hvd.Sum)) is x
        assert torch.equal(x, torch.full((3,), float(n * i + n * (n - 1) / 2)))
        y = torch.full((2,), float(r))
        h = hvd.allreduce_async_(y, None, "steady.positional", hvd.Max)
        assert hvd.synchronize(h) is y and torch.equal(y, torch.full((2,), float(n - 1)))
        z = torch.ones(3)
        hvd.synchronize(hvd.allreduce_async_(z, name="steady", op=hvd.Sum, prescale_factor=2.0))
        assert torch.equal(z, torch.full((3,), 2.0 * n))
        w = torch.ones(3)
        hvd.synchronize(hvd.allreduce_async_(w, name="steady", average=False))
        assert torch.equal(w, torch.full((3,), float(n)))
        base = torch.zeros(4, 2)
        column = base[:, 0]  # not contiguous
        column.fill_(1.0)
        assert hvd.synchronize(hvd.allreduce_async_(column, name="steady.strided",
                                                    op=hvd.Sum)) is column
        assert torch.equal(base, torch.stack([torch.full((4,), float(n)), torch.zeros(4)], 1))
        avg = torch.full((2,), float(r))
        hvd.synchronize(hvd.allreduce_async_(avg, name="steady.average"))
        assert torch.allclose(avg, torch.full((2,), (n - 1) / 2))
    with pytest.raises(TypeError):
        hvd.allreduce_async_(torch.ones(1), name="steady", op=hvd.Sum, colour="blue")
    with pytest.raises(TypeError):
        hvd.allreduce_async_(torch.ones(1), None, "steady", name="steady")
    assert hvd.synchronize(123456789) is None  # not a handle: as Horovod's map lookup
    assert hvd.allreduce_async_.__name__ == "allreduce_async_"
    assert "prescale_factor" in str(__import__("inspect").signature(hvd.allreduce_async_))


def test_the_tensor_api_reads_tensors_as_python_does():
    # hvrun.torch._tensor_api (built against this torch) reads tensors in C++; without it the
    # calls read the same through Python. Both ways must take and refuse the same tensors and
    # give the same results; a module built for another torch is never installed.
    from hvrun.torch import handles
    if not os.path.exists(os.path.join(os.path.dirname(handles.__file__), "_tensor_api" +
                                       __import__("sysconfig").get_config_var("EXT_SUFFIX"))):
        pytest.skip("hvrun.torch._tensor_api was not built (no torch C++ headers at configure "
                    "time, or HVRUN_WITH_TORCH_API=OFF)")
    assert handles._table.tensor_api_active, "built for this torch, but not installed"
    assert handles._tensor_api(torch.__version__) is handles._api
    assert handles._tensor_api(torch.__version__ + ".other") is None
    r, n = ranks()
    results = {}
    try:
        for mode in ("api", "python"):
            handles._table.use_tensor_api(handles._api if mode == "api" else None)
            assert handles._table.tensor_api_active == (mode == "api")
            got = {}
            for dtype in DTYPES + [torch.int16]:
                for shape in [(), (3,), (2, 3)]:
                    x = tensor(r, shape, dtype)
                    got[dtype, shape, "out"] = hvd.allreduce(x, name="api.out", op=hvd.Sum)
                    got[dtype, shape, "in"] = hvd.allreduce_(x.clone(), name="api.in", op=hvd.Sum)
                    got[dtype, shape, "async"] = hvd.synchronize(
                        hvd.allreduce_async_(x.clone(), name="api.async", op=hvd.Sum))
            m = tensor(r, (3, 4), torch.float32)
            got["strided"] = hvd.allreduce(m.t(), name="api.strided", op=hvd.Sum)  # not contiguous
            p = torch.nn.Parameter(tensor(r, (4,), torch.float32))
            got["param"] = hvd.allreduce(p.detach(), name="api.param", op=hvd.Sum)
            with pytest.raises(TypeError, match="dtype"):
                hvd.allreduce(torch.ones(2, dtype=torch.bool), name="api.bool")
            results[mode] = got
    finally:
        handles._table.use_tensor_api(handles._api)
    assert results["api"].keys() == results["python"].keys()
    for key, a in results["api"].items():
        b = results["python"][key]
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), key
    for kind in ("out", "in", "async"):
        expected = sum(tensor(k, (2, 3), torch.float64) for k in range(n))
        assert torch.equal(results["api"][torch.float64, (2, 3), kind], expected), kind
    assert torch.equal(results["api"]["strided"],
                       sum(tensor(k, (3, 4), torch.float32) for k in range(n)).t())


def test_repeated_blocking_calls_take_every_argument_form():
    # As the async calls: repeated named blocking calls run in C; a graph to record, another
    # compression, average=, a name in flight or bad arguments go to the Python functions.
    r, n = ranks()
    for i in range(4):
        x = torch.full((3,), float(r + i))
        assert hvd.allreduce_(x, name="blocking.in") is x
        assert torch.allclose(x, torch.full((3,), i + (n - 1) / 2))
        y = torch.full((2,), float(r))
        out = hvd.allreduce(y, None, "blocking.out", hvd.Compression.none, hvd.Max)
        assert out is not y and torch.equal(out, torch.full((2,), float(n - 1)))
        assert torch.equal(y, torch.full((2,), float(r)))
        # The same names with another op or scale, every time: the steady state keeps one
        # call per name, so each of these replaces the one above for the next iteration.
        s = torch.full((3,), float(r))
        assert hvd.allreduce_(s, name="blocking.in", op=hvd.Sum) is s
        assert torch.equal(s, torch.full((3,), n * (n - 1) / 2))
        scaled = hvd.allreduce(torch.ones(2), name="blocking.out", op=hvd.Max,
                               postscale_factor=3.0)
        assert torch.equal(scaled, torch.full((2,), 3.0))
        half = hvd.allreduce(torch.ones(2), name="blocking.fp16",
                             compression=hvd.Compression.fp16, op=hvd.Sum)
        assert half.dtype == torch.float32 and torch.equal(half, torch.full((2,), float(n)))
        summed = hvd.allreduce(torch.ones(2), name="blocking.out.sum", average=False)
        assert torch.equal(summed, torch.full((2,), float(n)))
        g = torch.ones(2, requires_grad=True)
        (hvd.allreduce(g, name="blocking.grad", op=hvd.Sum) * (r + 1)).sum().backward()
        assert torch.equal(g.grad, torch.full((2,), n * (n + 1) / 2))
    held = hvd.allreduce_async_(torch.ones(1), name="blocking.in", op=hvd.Average)
    with pytest.raises(ValueError, match="same name"):
        hvd.allreduce_(torch.ones(1), name="blocking.in")
    with pytest.raises(ValueError, match="same name"):
        hvd.allreduce(torch.ones(1), name="blocking.in")
    hvd.synchronize(held)
    with pytest.raises(TypeError):
        hvd.allreduce_(torch.ones(1), name="blocking.in", colour="blue")
    with pytest.raises(TypeError):
        hvd.allreduce(torch.ones(1), None, "blocking.out", name="blocking.out")
    assert hvd.allreduce.__name__ == "allreduce" and hvd.allreduce_.__name__ == "allreduce_"


def test_named_out_of_place_allreduce_repeated_on_cpu_stays_correct():
    # Named and repeated: may run on the fast path; the input stays as it was, a new tensor
    # holds the result, a non-contiguous input and integer dtypes included.
    r, n = ranks()
    base = torch.zeros(3, 4)
    for i in range(100):
        metric = torch.tensor([float(r + i)])
        out = hvd.allreduce(metric, name="torch.metric")
        assert out is not metric and metric.item() == r + i
        assert out.item() == i + (n - 1) / 2
        view = base[:, 1::2]
        view.fill_(r + i)
        summed = hvd.allreduce(view, op=hvd.Sum, name="torch.out.view")
        assert summed.is_contiguous() and summed.shape == (3, 2)
        assert torch.equal(summed, torch.full((3, 2), float(n * i + n * (n - 1) / 2)))
        assert torch.equal(view, torch.full((3, 2), float(r + i)))
        counts = hvd.allreduce(torch.tensor([r, i], dtype=torch.int64), op=hvd.Max,
                               name="torch.out.counts")
        assert counts.tolist() == [n - 1, i]


def test_allreduce_async_poll_synchronize():
    r, n = ranks()
    xs = [torch.full((3,), float(i * (r + 1))) for i in range(8)]
    handles = [hvd.allreduce_async(x, name="t.async.%d" % i, op=hvd.Sum) for i, x in enumerate(xs)]
    handles_ = [hvd.allreduce_async_(x, name="t.async_.%d" % i, op=hvd.Max) for i, x in enumerate(xs)]
    outs = [hvd.synchronize(h) for h in handles]
    for h in handles_:
        hvd.synchronize(h)
        with pytest.raises(ValueError):
            hvd.poll(h)  # synchronized handles are gone
    for i, out in enumerate(outs):
        assert torch.equal(out, torch.full((3,), float(i * n * (n + 1) / 2)))
        assert torch.equal(xs[i], torch.full((3,), float(i * n)))  # Max over ranks, in place
    h = hvd.allreduce_async(torch.ones(2))
    deadline = time.monotonic() + 30
    while not hvd.poll(h):
        assert time.monotonic() < deadline, "allreduce_async never completed"
        time.sleep(0.001)
    assert torch.equal(hvd.synchronize(h), torch.ones(2))


def test_allreduce_autograd():
    r, n = ranks()
    x = torch.full((3,), float(r + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum)
    (y * (r + 1)).sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), n * (n + 1) / 2))


def test_grouped_allreduce():
    r, n = ranks()
    xs = [torch.full((i + 1, 2), float(r + i)) for i in range(4)] + [torch.arange(3, dtype=torch.int64)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum)
    for i in range(4):
        assert torch.equal(outs[i], torch.full((i + 1, 2), float(n * i + n * (n - 1) / 2)))
        assert torch.equal(xs[i], torch.full((i + 1, 2), float(r + i)))
    assert torch.equal(outs[4], torch.arange(3) * n)
    avg = hvd.grouped_allreduce([torch.full((2,), float(r))])
    assert torch.allclose(avg[0], torch.full((2,), (n - 1) / 2))
    h = hvd.grouped_allreduce_async_(xs, op=hvd.Min)
    assert hvd.synchronize(h) is not None
    assert torch.equal(xs[1], torch.full((2, 2), 1.0))
    assert hvd.grouped_allreduce_(xs[:1], op=hvd.Max)[0] is xs[0]


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_allgather_dtypes_uneven(dtype):
    r, n = ranks()
    mine = (torch.arange((r + 1) * 3).reshape(r + 1, 3) % 2 + r).to(dtype)
    out = hvd.allgather(mine)
    expected = torch.cat([(torch.arange((i + 1) * 3).reshape(i + 1, 3) % 2 + i).to(dtype)
                          for i in range(n)])
    assert out.dtype == dtype and out.shape == expected.shape
    assert torch.equal(out, expected)


def test_allgather_async_grouped_and_autograd():
    r, n = ranks()
    h = hvd.allgather_async(torch.full((2,), r))
    assert torch.equal(hvd.synchronize(h), torch.arange(n).repeat_interleave(2))
    outs = hvd.grouped_allgather([torch.full((1, 2), float(r)), torch.full((r + 1,), r)])
    assert torch.equal(outs[0], torch.arange(n, dtype=torch.float32).repeat_interleave(2).view(n, 2))
    assert outs[1].numel() == n * (n + 1) // 2
    x = torch.full((r + 1, 2), 1.0, requires_grad=True)
    hvd.allgather(x).sum().backward()
    assert torch.allclose(x.grad, torch.ones(r + 1, 2))  # averaged over ranks, as Horovod


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_broadcast_variants(dtype):
    r, n = ranks()
    root = 1
    x = tensor(r, (3, 2), dtype, seed=7)
    expected = tensor(root, (3, 2), dtype, seed=7)
    out = hvd.broadcast(x, root)
    assert out.dtype == dtype and torch.equal(out, expected)
    assert torch.equal(x, tensor(r, (3, 2), dtype, seed=7))
    assert torch.equal(hvd.synchronize(hvd.broadcast_async(x, root)), expected)
    hvd.synchronize(hvd.broadcast_async_(x, 0))
    assert torch.equal(x, tensor(0, (3, 2), dtype, seed=7))
    y = tensor(r, (4,), dtype, seed=8)
    assert hvd.broadcast_(y, root) is y and torch.equal(y, tensor(root, (4,), dtype, seed=8))


def test_alltoall():
    r, n = ranks()
    x = torch.arange(2 * n) + 100 * r
    out = hvd.alltoall(x)  # no splits: equal parts, output only
    assert torch.equal(out, torch.cat([torch.arange(2 * r, 2 * r + 2) + 100 * s for s in range(n)]))
    splits = torch.tensor([(r + d) % 3 for d in range(n)], dtype=torch.int32)
    rows = torch.cat([torch.full((int(splits[d]), 2), float(10 * r + d)) for d in range(n)])
    out, received = hvd.alltoall(rows, splits=splits)
    expected_splits = [(s + r) % 3 for s in range(n)]
    assert received.dtype == torch.int32 and received.tolist() == expected_splits
    expected = torch.cat([torch.full((expected_splits[s], 2), float(10 * s + r)) for s in range(n)])
    assert torch.equal(out, expected)
    out, received = hvd.synchronize(hvd.alltoall_async(rows, splits=splits.tolist()))
    assert torch.equal(out, expected)


def test_reducescatter_and_grouped():
    r, n = ranks()
    rows = 2 * n + 1
    base = torch.arange(rows * 2, dtype=torch.float64).view(rows, 2)
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(counts[:r])
    out = hvd.reducescatter(base * (r + 1), op=hvd.Sum)
    assert torch.equal(out, (base * (n * (n + 1) / 2))[start:start + counts[r]])
    avg = hvd.reducescatter(base * (r + 1))  # default op: Average
    assert torch.allclose(avg, (base * ((n + 1) / 2))[start:start + counts[r]])
    outs = hvd.grouped_reducescatter([base, base.float()], op=hvd.Sum)
    assert torch.equal(outs[0], (base * n)[start:start + counts[r]])
    assert outs[1].dtype == torch.float32


def test_broadcast_and_allgather_object():
    r, n = ranks()
    obj = {"rank": r, "payload": list(range(r + 3))}
    assert hvd.broadcast_object(obj, root_rank=n - 1) == {"rank": n - 1, "payload": list(range(n + 2))}
    gathered = hvd.allgather_object(obj)
    assert gathered == [{"rank": i, "payload": list(range(i + 3))} for i in range(n)]


def test_objects_of_any_size_and_none():
    """One allgather carries an object (see hvrun/_object_wire.py): sizes that differ per rank,
    a megabyte, None, and ranks that send nothing all arrive whole."""
    r, n = ranks()

    def big(k):
        return bytes([k]) * (1 << 20) + b"x" * k

    assert hvd.broadcast_object(big(r), root_rank=n - 1, name="obj.big") == big(n - 1)
    assert hvd.broadcast_object(None, root_rank=0, name="obj.none") is None
    gathered = hvd.allgather_object(big(r) if r % 2 == 0 else None, name="obj.mixed")
    assert gathered == [big(k) if k % 2 == 0 else None for k in range(n)]
    assert hvd.allgather_object(b"", name="obj.empty") == [b""] * n


def test_barrier_repeated():
    for _ in range(3):
        hvd.barrier()


def test_join_with_uneven_batches():
    """Rank r has r + 2 batches; a joined rank contributes zeros, Average divides by the ranks
    that contributed, and join returns the last rank to join (it alone saw every batch)."""
    r, n = ranks()
    for step in range(r + 2):
        out = hvd.allreduce(torch.full((4,), float(step + 1)), name="join.grad", op=hvd.Sum)
        contributing = sum(1 for i in range(n) if step < i + 2)
        assert torch.equal(out, torch.full((4,), float(contributing * (step + 1))))
    assert hvd.join() == n - 1
    hvd.barrier()


def test_mismatched_shapes_raise_on_every_rank():
    r, n = ranks()
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allreduce(torch.ones(r + 2), name="mismatch.shape")
    assert "mismatch.shape" in str(info.value)
    with pytest.raises(hvd.HorovodInternalError):
        hvd.broadcast(torch.ones(2, dtype=torch.float32 if r == 0 else torch.float64), 0,
                      name="mismatch.dtype")
    # The job goes on after a mismatch.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))


def test_unsupported_dtype():
    with pytest.raises(TypeError):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))


def test_checkpoint_saves_on_rank_0_and_restores_every_rank():
    # One directory for the whole job (every rank computes the same name).
    directory = os.path.join(tempfile.gettempdir(), "hvrun-pyckpt-" + os.environ["HVRUN_JOB_ID"])
    rank = hvd.rank()
    w = torch.arange(6, dtype=torch.float32) + 10 * rank
    b = torch.full((3, 2), float(rank), dtype=torch.float64).t()  # not contiguous: a host copy
    ckpt = hvd.Checkpoint({"w": w, "b": b}, directory=directory, every=5, name="pytest")
    assert ckpt.enabled
    assert ckpt.save_if_due(3) is None
    path = ckpt.save_if_due(5)
    # Every rank gets the path rank 0 wrote (a failed write would raise on every rank).
    assert path is not None and path.endswith(".hvckpt")
    assert hvd.broadcast_object(path, 0, name="ckpt_path") == path
    w.fill_(-1)
    b.fill_(-1)
    assert ckpt.restore() == 5
    assert torch.equal(w, torch.arange(6, dtype=torch.float32))  # rank 0's state, everywhere
    assert torch.equal(b, torch.zeros(2, 3, dtype=torch.float64))
    other = hvd.Checkpoint({"w": w}, directory=directory, name="pytest")  # another layout
    assert other.restore() == -1
    hvd.barrier()
    if rank == 0:
        shutil.rmtree(directory)


def test_checkpoint_save_that_fails_on_rank_0_raises_on_every_rank():
    # The directory cannot be made (a path under a regular file): rank 0's write fails, and
    # every rank hears of it instead of taking the save for a good one.
    unwritable = os.path.join(os.devnull, "hvrun-ckpt")
    ckpt = hvd.Checkpoint({"w": torch.ones(3)}, directory=unwritable, every=1, name="pytest")
    with pytest.raises(HvrunError) as raised:
        ckpt.save(1)
    if hvd.rank() != 0:
        assert "rank 0 could not write the checkpoint of step 1" in str(raised.value)
    hvd.barrier()


def test_init_shutdown_init():
    """Test suites re-initialize per test case: the same ranks register again, collectives
    before shutdown fail cleanly after it, and the job goes on (this test leaves it initialized)."""
    r, n = ranks()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError):
        hvd.rank()
    for _ in range(2):
        hvd.init()
        assert (hvd.rank(), hvd.size()) == (r, n)
        assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)))
        hvd.shutdown()
    hvd.init()
    hvd.init()  # idempotent while initialized
    assert torch.equal(hvd.allgather(torch.tensor([r])), torch.arange(n))


def test_timeline_start_stop_and_mark_step():
    """hvd.start_timeline / stop_timeline (Horovod's API) write the job's timeline; every rank's
    collectives are in it once it is closed. hvd.mark_step() counts steps (no error)."""
    r, n = ranks()
    path = os.path.join(tempfile.gettempdir(), "hvrun-pytimeline-%s.json" % hvrun_job_id())
    if r == 0:
        hvd.start_timeline(path)
    hvd.barrier()  # rank 0's start reached the coordinator before this barrier's request
    for step in range(3):
        hvd.allreduce(torch.ones(16), name="timeline.grad", op=hvd.Sum)
        hvd.mark_step()
    hvd.barrier()
    if r == 0:
        hvd.stop_timeline()
        deadline = time.monotonic() + 10
        text = ""
        while time.monotonic() < deadline:  # closed once every rank's last events arrived
            with open(path) as f:
                text = f.read()
            if text.rstrip().endswith("]"):
                break
            time.sleep(0.05)
        import json
        events = json.loads(text)
        ranks_with_collective = {e["pid"] for e in events if e.get("name") == "collective"}
        assert ranks_with_collective == set(range(n)), ranks_with_collective
        os.remove(path)
    hvd.barrier()


def hvrun_job_id():
    import hvrun
    return hvrun.job_id()

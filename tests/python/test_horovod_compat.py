"""hvrun.torch against horovod.torch 0.28.1's signatures and documented semantics: argument
order, scale factors on reducescatter, gradients of every op Horovod differentiates, sparse
gradients, DistributedOptimizer groups, cloudpickled objects, int16, duplicate names refused at
submission, allgather/broadcast under join, alltoall argument errors, Horovod's warning text."""
import inspect
import os
import warnings

import numpy as np
import pytest
import torch

import hvrun.torch as hvd


def ranks():
    return hvd.rank(), hvd.size()


def params_of(fn):
    return list(inspect.signature(fn).parameters)


# ---- signatures

def test_signatures_follow_horovod():
    rs = ["tensor", "name", "op", "process_set", "prescale_factor", "postscale_factor"]
    assert params_of(hvd.reducescatter_async) == rs
    assert params_of(hvd.reducescatter) == ["tensor", "name", "compression"] + rs[2:]
    grouped = ["tensors"] + rs[1:]
    assert params_of(hvd.grouped_reducescatter_async) == grouped
    assert params_of(hvd.grouped_reducescatter) == ["tensors", "name", "compression"] + rs[2:]
    assert params_of(hvd.broadcast_optimizer_state)[:3] == ["optimizer", "root_rank", "model"]
    assert params_of(hvd.sparse_allreduce_async) == ["tensor", "name", "op", "process_set"]
    assert params_of(hvd.ProcessSet) == ["ranks_or_comm"]


def test_positional_reducescatter_binds_process_set_as_horovod():
    r, n = ranks()
    x = torch.ones(2 * n, 3)
    out = hvd.synchronize(hvd.reducescatter_async(x, None, hvd.Sum, hvd.global_process_set))
    assert torch.equal(out, torch.full((2, 3), float(n)))
    out = hvd.reducescatter(x, None, hvd.Compression.none, hvd.Sum, hvd.global_process_set, 0.5)
    assert torch.equal(out, torch.full((2, 3), 0.5 * n))


def test_process_sets_global_ranks_and_ranks_or_comm():
    r, n = ranks()
    assert hvd.global_process_set.ranks == list(range(n))
    assert hvd.global_process_set.size() == n and hvd.global_process_set.included()
    everyone = hvd.ProcessSet(ranks_or_comm=list(reversed(range(n))))
    assert everyone.ranks == list(range(n))
    with pytest.raises(ValueError, match="already has exactly these ranks"):
        hvd.add_process_set(everyone)  # the global set has them
    with pytest.raises(ValueError):
        hvd.ProcessSet(ranks_or_comm=["a"])
    with pytest.raises(ValueError, match="has not been added"):
        hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]))


def test_is_homogeneous_from_the_host_layout():
    # One host: every rank's local size is the job's size; every host holds the same count.
    local_sizes = hvd.allgather(torch.tensor([hvd.local_size()]))
    assert hvd.is_homogeneous() == (len(set(local_sizes.tolist())) == 1)
    assert hvd.is_homogeneous()


# ---- reducescatter scale factors: every dtype, Horovod's rule

SCALED_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                 torch.bfloat16, torch.float32, torch.float64]


def scaled_reference(inputs, dtype, pre, post):
    """Integers scale in double and are cast back (truncated) before the sum and after it."""
    if dtype.is_floating_point:
        return sum(x.double() * pre for x in inputs) * post
    total = sum(torch.trunc(x.double() * pre) for x in inputs)
    return torch.trunc(total * post)


@pytest.mark.parametrize("dtype", SCALED_DTYPES)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_honours_scale_factors(dtype, op):
    r, n = ranks()
    rows = 2 * n
    inputs = [(torch.arange(rows * 3).view(rows, 3) % 5 + k + 1).to(dtype) for k in range(n)]
    pre, post = 0.5, 4.0
    effective_post = post / n if op == hvd.Average else post
    want = scaled_reference(inputs, dtype, pre, effective_post)[2 * r:2 * r + 2]
    out = hvd.reducescatter(inputs[r], op=op, prescale_factor=pre, postscale_factor=post)
    assert out.dtype == dtype and out.shape == (2, 3)
    assert same(out, want, dtype), (out, want)
    outs = hvd.grouped_reducescatter([inputs[r], inputs[r]], op=op, prescale_factor=pre,
                                     postscale_factor=post)
    assert all(same(o, want, dtype) for o in outs)


def same(got, want, dtype):
    if not dtype.is_floating_point:
        return torch.equal(got.double(), want)
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-6}.get(dtype, 1e-12)
    return torch.allclose(got.double(), want, rtol=tolerance, atol=0)


def test_allreduce_integer_average_as_horovod():
    """Average is the sum times 1/size, cast back: 1/3 of 10 is 3, of -10 is -3."""
    r, n = ranks()
    x = torch.tensor([10, -10, 7], dtype=torch.int32) if r == 0 else torch.zeros(3, dtype=torch.int32)
    want = torch.trunc(torch.tensor([10.0, -10.0, 7.0], dtype=torch.float64) * (1.0 / n))
    assert torch.equal(hvd.allreduce(x).double(), want)


# ---- gradients (Horovod's formulas; alltoall against the exact derivative)

def test_grouped_allreduce_gradient():
    r, n = ranks()
    xs = [torch.full((3,), float(r + 1), dtype=torch.float64, requires_grad=True),
          torch.full((2, 2), float(r), dtype=torch.float64, requires_grad=True)]
    weights = [torch.full((3,), float(r + 2), dtype=torch.float64),
               torch.full((2, 2), float(3 * r + 1), dtype=torch.float64)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    sum(((y * w).sum() for y, w in zip(ys, weights))).backward()
    # The gradient of an allreduce is the allreduce of the gradient (same op).
    f64 = torch.float64
    total_w0 = float(sum(k + 2 for k in range(n)))
    assert torch.allclose(xs[0].grad, torch.full((3,), total_w0, dtype=f64))
    assert torch.allclose(xs[1].grad, torch.full((2, 2), float(sum(3 * k + 1 for k in range(n))),
                                                 dtype=f64))
    avg = hvd.grouped_allreduce([xs[0]])  # Average: the averaged gradient
    (avg[0] * weights[0]).sum().backward()
    assert torch.allclose(xs[0].grad, torch.full((3,), total_w0 + total_w0 / n, dtype=f64))


def test_grouped_allgather_gradient():
    r, n = ranks()
    a = torch.arange(float(r + 1), dtype=torch.float64).requires_grad_()  # r + 1 rows
    b = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b])
    assert ga.shape == (n * (n + 1) // 2,) and gb.shape == (2 * n, 2)
    # Each rank weighs the gathered rows by (rank + 1) * row index.
    wa = torch.arange(ga.numel(), dtype=torch.float64) * (r + 1)
    wb = torch.arange(gb.numel(), dtype=torch.float64).view_as(gb) * (r + 1)
    ((ga * wa).sum() + (gb * wb).sum()).backward()
    mean_scale = sum(k + 1 for k in range(n)) / n  # averaged over ranks, as Horovod
    start = r * (r + 1) // 2
    assert torch.allclose(a.grad, torch.arange(start, start + r + 1, dtype=torch.float64) * mean_scale)
    assert torch.allclose(b.grad, torch.arange(4 * r, 4 * r + 4, dtype=torch.float64).view(2, 2)
                          * mean_scale)


def cell(src, dst, k):
    return 100.0 * src + 10.0 * dst + k


def test_alltoall_gradient_is_the_exact_derivative():
    r, n = ranks()
    splits = [(r + d) % 3 for d in range(n)]
    x = torch.cat([torch.full((splits[d], 2), float(d)) for d in range(n)]).double()
    x.requires_grad_()
    out, received = hvd.alltoall(x, splits=splits)
    # Rank r weighs the k-th row it received from src by cell(src, r, k): the derivative of the
    # summed loss w.r.t. the k-th row rank r sent to dst is cell(r, dst, k).
    w = []
    for src, count in enumerate(received.tolist()):
        for k in range(count):
            w.append([cell(src, r, k)] * 2)
    (out * torch.tensor(w, dtype=torch.float64).view_as(out)).sum().backward()
    want = [[cell(r, d, k)] * 2 for d in range(n) for k in range(splits[d])]
    assert torch.equal(x.grad, torch.tensor(want, dtype=torch.float64).view_as(x))
    # Without splits: equal parts, output only, gradient as well.
    y = torch.ones(2 * n, dtype=torch.float64, requires_grad=True)
    (hvd.alltoall(y) * (r + 1)).sum().backward()
    assert torch.equal(y.grad, torch.cat([torch.full((2,), float(d + 1), dtype=torch.float64)
                                          for d in range(n)]))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_gradients_follow_horovod(op):
    r, n = ranks()
    pre, post = 0.5, 3.0
    x = torch.ones(2 * n, 2, dtype=torch.float64, requires_grad=True)
    y = torch.ones(n, dtype=torch.float64, requires_grad=True)
    out = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post)
    outs = hvd.grouped_reducescatter([x, y], op=op)
    g = torch.full((2, 2), float(r + 1), dtype=torch.float64)
    ((out * g).sum() + (outs[0] * g).sum() + (outs[1] * (r + 1)).sum()).backward()
    # Horovod: the allgather of the gradient, times size for Sum, times the scale factors.
    factor = n if op == hvd.Sum else 1
    gathered = torch.cat([torch.full((2, 2), float(k + 1), dtype=torch.float64) for k in range(n)])
    assert torch.allclose(x.grad, gathered * factor * pre * post + gathered * factor)
    assert torch.allclose(y.grad, torch.arange(1, n + 1, dtype=torch.float64) * factor)


# ---- SyncBatchNorm against one BatchNorm over the global batch

@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 2, 2)])
def test_sync_batch_norm_matches_batch_norm_over_the_global_batch(shape):
    r, n = ranks()
    generator = torch.Generator().manual_seed(7)
    per_rank = [torch.randn(shape, generator=generator, dtype=torch.float64) * (k + 1) + k
                for k in range(n)]
    upstream = [torch.randn(shape, generator=generator, dtype=torch.float64) for _ in range(n)]
    channels = shape[1]
    reference = torch.nn.BatchNorm1d(channels, momentum=0.3).double()
    if len(shape) == 4:
        reference = torch.nn.BatchNorm2d(channels, momentum=0.3).double()
    sync = hvd.SyncBatchNorm(channels, momentum=0.3).double()
    with torch.no_grad():
        for bn in (reference, sync):
            bn.weight.copy_(torch.arange(1.0, channels + 1))
            bn.bias.copy_(torch.arange(channels) * 0.5)

    whole = torch.cat(per_rank).requires_grad_()
    (reference(whole) * torch.cat(upstream)).sum().backward()

    mine = per_rank[r].clone().requires_grad_()
    out = sync(mine)
    (out * upstream[r]).sum().backward()
    rows = slice(r * shape[0], (r + 1) * shape[0])
    with torch.no_grad():
        reference_out = torch.nn.functional.batch_norm(
            whole, None, None, reference.weight, reference.bias, True, 0.0, reference.eps)
    assert torch.allclose(out, reference_out[rows], atol=1e-10)
    assert torch.allclose(mine.grad, whole.grad[rows], atol=1e-10)
    # Weight and bias gradients stay local; their sum over ranks is the global batch's.
    assert torch.allclose(hvd.allreduce(sync.weight.grad, op=hvd.Sum), reference.weight.grad)
    assert torch.allclose(hvd.allreduce(sync.bias.grad, op=hvd.Sum), reference.bias.grad)
    assert torch.allclose(sync.running_mean, reference.running_mean, atol=1e-12)
    assert torch.allclose(sync.running_var, reference.running_var, atol=1e-12)
    assert int(sync.num_batches_tracked) == 1
    sync.eval()  # eval: the running statistics, no communication
    assert torch.allclose(sync(per_rank[r]), reference.eval()(per_rank[r]))


# ---- sparse gradients

def dense_embedding_grads(n, num, dim, batches):
    grads = []
    for k in range(n):
        emb = torch.nn.Embedding(num, dim)
        emb(batches[k]).sum().backward()
        grads.append(emb.weight.grad)
    return grads


def test_sparse_allreduce_async_allgathers_indices_and_values():
    r, n = ranks()
    dense = torch.zeros(5, 2)
    dense[r % 5] = float(r + 1)
    dense[(r + 2) % 5, 1] = 2.0
    handle = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse.grad", op=hvd.Sum)
    reduced = handle()
    assert reduced.is_sparse
    want = torch.zeros(5, 2)
    for k in range(n):
        want[k % 5] += float(k + 1)
        want[(k + 2) % 5, 1] += 2.0
    assert torch.equal(reduced.to_dense(), want)
    avg = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse.avg", op=hvd.Average)()
    assert torch.allclose(avg.to_dense(), want / n)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_distributed_optimizer_reduces_sparse_gradients(sparse_as_dense):
    r, n = ranks()
    torch.manual_seed(0)
    model = torch.nn.Embedding(6, 3, sparse=True)
    batches = [torch.tensor([k % 6, (k + 3) % 6, k % 6]) for k in range(n)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    before = model.weight.detach().clone()
    model(batches[r]).sum().backward()
    opt.synchronize()
    assert model.weight.grad.is_sparse
    want = sum(dense_embedding_grads(n, 6, 3, batches)) / n
    assert torch.allclose(model.weight.grad.to_dense(), want)
    with opt.skip_synchronize():
        opt.step()
    assert torch.allclose(model.weight.detach(), before - 0.1 * want)


def test_broadcast_optimizer_state_with_a_sparse_model():
    r, n = ranks()
    model = torch.nn.Sequential(torch.nn.Embedding(4, 2, sparse=True))
    with torch.no_grad():
        model[0].weight.fill_(float(r))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    hvd.broadcast_optimizer_state(sgd, 0, model=model)  # zero sparse gradient for the step
    assert sgd.param_groups[0]["lr"] == pytest.approx(0.1)
    adam = torch.optim.SparseAdam(list(model.parameters()), lr=0.01 * (r + 1))
    hvd.broadcast_optimizer_state(adam, root_rank=0)  # SparseAdam refuses dense gradients
    assert adam.param_groups[0]["lr"] == pytest.approx(0.01)
    assert len(adam.state_dict()["state"]) == 1


# ---- DistributedOptimizer groups

def two_layer_model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def averaged_grads(r, n, model_fn):
    grads = None
    for k in range(n):
        model = model_fn()
        model(torch.full((2, 3), float(k + 1))).sum().backward()
        g = [p.grad.clone() for p in model.parameters()]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    return [g / n for g in grads]


@pytest.mark.parametrize("how", ["count", "lists", "num_groups"])
def test_distributed_optimizer_groups_go_as_grouped_allreduces(how):
    r, n = ranks()
    model = two_layer_model()
    params = list(model.parameters())
    kwargs = {"count": {"groups": 2}, "lists": {"groups": [[params[0], params[2]]]},
              "num_groups": {"num_groups": 2}}[how]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), **kwargs)
    if how == "num_groups":
        assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    model(torch.full((2, 3), float(r + 1))).sum().backward()
    grouped = [k for k in opt._handles if isinstance(k, tuple)]
    expected_sizes = {"count": [2, 2], "lists": [1, 1, 2], "num_groups": [2, 2]}[how]
    assert sorted(len(g) for g in grouped) == expected_sizes
    opt.synchronize()
    for p, want in zip(model.parameters(), averaged_grads(r, n, two_layer_model)):
        assert torch.allclose(p.grad, want)
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(),
                                 groups=[[params[0], params[0]]])


def test_step_after_synchronize_warns_with_horovods_text():
    r, n = ranks()
    model = two_layer_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(2, 3)).sum().backward()
    opt.synchronize()
    with pytest.warns(UserWarning) as record:
        opt.step()
    assert str(record[0].message) == (
        "optimizer.step() called without optimizer.skip_synchronize() context after "
        "optimizer.synchronize(). This can cause training slowdown. You may want to consider "
        "using optimizer.skip_synchronize() context if you use optimizer.synchronize() in your "
        "code.")


# ---- objects, int16

def test_objects_travel_with_cloudpickle():
    r, n = ranks()

    class Local:
        def __init__(self, v):
            self.v = v

    fn = hvd.broadcast_object(lambda x: x * 10 + 1 if r == 0 else None, root_rank=0)
    assert fn(2) == 21
    assert hvd.broadcast_object(Local(r + 5), root_rank=0).v == 5
    got = hvd.allgather_object(lambda k=r: k * 2)
    assert [f() for f in got] == [2 * k for k in range(n)]


def test_int16_tensors():
    r, n = ranks()
    x = torch.tensor([r - 1, 300, -300 + r], dtype=torch.int16)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum),
                       torch.tensor([sum(k - 1 for k in range(n)), 300 * n,
                                     sum(-300 + k for k in range(n))], dtype=torch.int16))
    assert torch.equal(hvd.allreduce(x, op=hvd.Min)[2], torch.tensor(-300, dtype=torch.int16))
    assert torch.equal(hvd.allgather(x.view(3, 1)).view(-1),
                       torch.cat([torch.tensor([k - 1, 300, -300 + k], dtype=torch.int16)
                                  for k in range(n)]))
    assert torch.equal(hvd.broadcast(x, 0), torch.tensor([-1, 300, -300], dtype=torch.int16))
    parts = torch.arange(n, dtype=torch.int16) + 10 * r
    assert torch.equal(hvd.alltoall(parts), torch.arange(n, dtype=torch.int16) * 10 + r)
    assert hvd.reducescatter(torch.ones(n, dtype=torch.int16), op=hvd.Sum).tolist() == [n]


# ---- point-8 semantics

@pytest.mark.parametrize("kind", ["allreduce", "allreduce_", "allgather", "broadcast",
                                  "reducescatter"])
def test_a_name_in_flight_is_refused_at_submission_on_every_rank(kind):
    r, n = ranks()
    x = torch.ones(n, 2)
    start = {"allreduce": lambda: hvd.allreduce_async(x, name="dup", op=hvd.Sum),
             "allreduce_": lambda: hvd.allreduce_async_(x, name="dup", op=hvd.Sum),
             "allgather": lambda: hvd.allgather_async(x, name="dup"),
             "broadcast": lambda: hvd.broadcast_async(x, 0, name="dup"),
             "reducescatter": lambda: hvd.reducescatter_async(x, name="dup", op=hvd.Sum)}[kind]
    first = start()
    with pytest.raises(ValueError) as info:
        start()
    assert "same name" in str(info.value) and "dup" in str(info.value)
    hvd.synchronize(first)
    second = start()  # free again once synchronized
    hvd.synchronize(second)
    # Every rank refused the same call: the job is in step.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
    group = hvd.grouped_allgather_async([x, x], name="dup.group")
    with pytest.raises(ValueError):
        hvd.grouped_allgather_async([x], name="dup.group")
    assert len(hvd.synchronize(group)) == 2


def test_in_place_and_out_of_place_allreduces_share_the_names_in_flight():
    # The in-place call of a CPU tensor is registered in the extension, the out-of-place one in
    # Python: a name is refused whichever took it first, and free again once synchronized.
    r, n = ranks()
    x, y = torch.ones(3), torch.ones(3)
    for _ in range(3):  # the first call, then the remembered steady-state one
        inplace = hvd.allreduce_async_(x, name="shared", op=hvd.Sum)
        with pytest.raises(ValueError, match="same name"):
            hvd.allreduce_async(y, name="shared", op=hvd.Sum)
        with pytest.raises(ValueError, match="same name"):
            hvd.allreduce_async_(y, name="shared", op=hvd.Sum)
        assert hvd.synchronize(inplace) is x
        out = hvd.allreduce_async(y, name="shared", op=hvd.Sum)
        with pytest.raises(ValueError, match="same name"):
            hvd.allreduce_async_(x, name="shared", op=hvd.Sum)
        assert torch.equal(hvd.synchronize(out), torch.full((3,), float(n)))
    assert torch.equal(x, torch.full((3,), float(n ** 3)))
    with pytest.raises(ValueError):
        hvd.poll(inplace)  # synchronized: gone


def test_allgather_and_broadcast_raise_while_ranks_joined_and_average_counts_every_rank():
    r, n = ranks()
    if r == 0:
        assert hvd.join() in range(1, n)
        return
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allgather(torch.ones(1, 2), name="joined.allgather")
    assert "Allgather is not supported with Join" in str(info.value)
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.broadcast(torch.ones(2), 1, name="joined.broadcast")
    assert "Broadcast is not supported with Join" in str(info.value)
    # Horovod's Average divides by every rank, joined ones included (they contribute zeros);
    # a job started with --join-average contributing divides by the ranks that contributed.
    out = hvd.allreduce(torch.full((3,), 6.0), name="joined.average")
    divisor = n - 1 if os.environ.get("HVRUN_JOIN_AVERAGE") == "contributing" else n
    assert torch.allclose(out, torch.full((3,), 6.0 * (n - 1) / divisor))
    assert hvd.join() in range(1, n)


def test_alltoall_argument_errors_raise_value_error_at_the_call():
    r, n = ranks()
    x = torch.ones(n * 2 + 1, 2)
    with pytest.raises(ValueError):
        hvd.alltoall(x)  # rows do not split evenly
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=[1] * (n + 1))
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=[-1] + [0] * (n - 2) + [2 * n + 2])
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=[0.5] * n)
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=torch.tensor([1.0] * n))
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=[1] * n)  # sums to n, not 2n+1
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=3)
    with pytest.raises(ValueError):
        hvd.alltoall(torch.tensor(1.0))
    # Nothing was sent: the next alltoall works on every rank.
    assert hvd.alltoall(torch.ones(n)).shape == (n,)


def test_init_checks_its_process_sets_argument():
    # Already initialised by the suite: the argument is checked before anything else.
    with pytest.raises(ValueError, match="takes a list of ProcessSet"):
        hvd.init(process_sets="static")
    hvd.init(process_sets=[])  # nothing to make: accepted, as Horovod does


# ---- summation order (docs/python.md, "Summation order")

def documented_order(inputs, pre, post, n):
    """hvrun's arithmetic on one host, in float32: every rank's tensor times the prescale
    (float32), summed in rank order, times postscale/size (Horovod's Average) as one float32."""
    f32 = torch.float32
    scaled = [x * torch.tensor(pre, dtype=f32) for x in inputs]
    total = scaled[0]
    for s in scaled[1:]:
        total = total + s
    return total * torch.tensor(post / n, dtype=f32)


def test_prescaled_average_is_the_documented_summation_order_bit_for_bit():
    r, n = ranks()
    rng = torch.Generator().manual_seed(7)
    inputs = [torch.rand(4099, generator=rng, dtype=torch.float32) * 3 - 1 for _ in range(n)]
    out = hvd.allreduce(inputs[r], name="order.prescaled", op=hvd.Average,
                        prescale_factor=0.3, postscale_factor=1.7)
    assert torch.equal(out, documented_order(inputs, 0.3, 1.7, n))


def test_joined_average_is_the_documented_summation_order_bit_for_bit():
    # The last rank joins: it contributes zeros at its place in the order (x + 0 is exact).
    r, n = ranks()
    rng = torch.Generator().manual_seed(11)
    inputs = [torch.rand(257, generator=rng, dtype=torch.float32) - 0.5 for _ in range(n)]
    if r == n - 1:
        hvd.join()
        return
    out = hvd.allreduce(inputs[r], name="order.joined", op=hvd.Average, prescale_factor=0.7)
    inputs[n - 1] = torch.zeros_like(inputs[n - 1])
    expected = documented_order(inputs, 0.7, 1.0, n)
    hvd.join()
    if os.environ.get("HVRUN_JOIN_AVERAGE") != "contributing":
        assert torch.equal(out, expected)

"""DistributedOptimizer, broadcast_parameters and broadcast_optimizer_state against a local
reference: every rank recomputes what the averaged step must give from all ranks' data."""
import copy

import pytest
import torch

import hvrun.torch as hvd


def ranks():
    return hvd.rank(), hvd.size()


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def batch(rank, step=0):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)


def loss_of(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def reference_step(model, lr, n, passes=1, reduce="mean"):
    """One SGD step with the gradient averaged (or summed) over every rank's batches."""
    ref = copy.deepcopy(model)
    grads = [torch.zeros_like(p) for p in ref.parameters()]
    for rank in range(n):
        for step in range(passes):
            ref.zero_grad()
            loss_of(ref, *batch(rank, step)).backward()
            for g, p in zip(grads, ref.parameters()):
                g += p.grad
    with torch.no_grad():
        for g, p in zip(grads, ref.parameters()):
            p -= lr * (g / n if reduce == "mean" else g)
    return ref


def assert_same_everywhere(model):
    for p in model.parameters():
        gathered = hvd.allgather(p.detach().unsqueeze(0))
        for other in gathered:
            assert torch.equal(other, gathered[0])


@pytest.mark.parametrize("kwargs,passes,reduce,tol", [
    ({}, 1, "mean", 1e-6),
    ({"backward_passes_per_step": 2}, 2, "mean", 1e-6),
    ({"compression": hvd.Compression.fp16}, 1, "mean", 2e-3),
    ({"op": hvd.Sum}, 1, "sum", 1e-6),
    ({"gradient_predivide_factor": 2.0}, 1, "mean", 1e-6),
])
def test_distributed_optimizer_matches_reference(kwargs, passes, reduce, tol):
    r, n = ranks()
    model = make_model(seed=1)
    expected = reference_step(model, 0.1, n, passes, reduce)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), **kwargs)
    assert isinstance(opt, torch.optim.SGD)
    opt.zero_grad()
    for step in range(passes):
        loss_of(model, *batch(r, step)).backward()
    opt.step()
    for p, q in zip(model.parameters(), expected.parameters()):
        assert torch.allclose(p, q, atol=tol), (p - q).abs().max()
    assert_same_everywhere(model)


def test_unnamed_parameters_synchronize_and_skip():
    r, n = ranks()
    model = make_model(seed=2)
    expected = reference_step(model, 0.05, n)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05))
    loss_of(model, *batch(r)).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    with opt.skip_synchronize():
        opt.step()
    for p, q in zip(model.parameters(), expected.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_zero_grad_between_backward_and_step_is_refused():
    r, n = ranks()
    model = make_model(seed=3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), )
    loss_of(model, *batch(r)).backward()
    with pytest.raises(AssertionError):
        opt.zero_grad()
    opt.step()


def test_parameter_unused_on_some_ranks():
    """A parameter without a gradient on one rank still takes part (zeros), nothing hangs."""
    r, n = ranks()
    model = make_model(seed=4)
    extra = torch.nn.Parameter(torch.ones(3))
    params = list(model.named_parameters()) + [("extra", extra)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=1.0),
                                   named_parameters=params)
    loss = loss_of(model, *batch(r))
    if r == 0:
        loss = loss + extra.sum()
    loss.backward()
    opt.step()
    assert torch.allclose(extra.detach(), torch.full((3,), 1.0 - 1.0 / n))


def test_duplicate_names_rejected():
    model = make_model(seed=5)
    params = list(model.named_parameters())
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("same", p) for _, p in params])


def test_broadcast_parameters_and_optimizer_state():
    r, n = ranks()
    root = n - 1
    model = make_model(seed=10 + r)
    root_model = make_model(seed=10 + root)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    for p, q in zip(model.parameters(), root_model.parameters()):
        assert torch.equal(p, q)
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    assert_same_everywhere(model)

    # Rank-specific optimizer state: a different lr and a local step on different data.
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1))
    loss_of(model, *batch(r)).backward()
    opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * (root + 1))
    for p in model.parameters():
        state = opt.state[p]
        for key in ("exp_avg", "exp_avg_sq"):
            gathered = hvd.allgather(state[key].unsqueeze(0))
            assert all(torch.equal(g, gathered[root]) for g in gathered)


def test_broadcast_optimizer_state_of_fresh_optimizer():
    model = make_model(seed=20)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for p in model.parameters():
        assert "momentum_buffer" in opt.state[p]


def test_uneven_batches_join_then_broadcast_from_the_last_rank():
    """Rank r trains r + 1 steps; join() carries the others to the end (joined ranks add zero
    gradients) and names the last rank, whose parameters then go to everyone."""
    r, n = ranks()
    model = make_model(seed=30)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    for step in range(r + 1):
        opt.zero_grad()
        loss_of(model, *batch(r, step)).backward()
        opt.step()
    last = hvd.join()
    assert last == n - 1
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)
    assert_same_everywhere(model)

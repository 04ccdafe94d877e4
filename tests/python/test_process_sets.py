"""hvrun.torch's process sets against references, on 3 and 4 ranks: static sets from init(),
added and removed sets (disjoint, overlapping, one made while another runs), every collective
and its gradient on a set, DistributedOptimizer on a set, and Horovod's errors."""
import numpy as np
import pytest
import torch

import hvrun.torch as hvd


def ranks():
    return hvd.rank(), hvd.size()


@pytest.fixture
def halves():
    """{even ranks} and {odd ranks}, removed after the test."""
    _, n = ranks()
    even = hvd.add_process_set([r for r in range(n) if r % 2 == 0])
    odd = hvd.add_process_set(hvd.ProcessSet([r for r in range(n) if r % 2 == 1]))
    yield even, odd
    hvd.barrier()
    assert hvd.remove_process_set(even) and hvd.remove_process_set(odd)


def mine(halves):
    even, odd = halves
    return even if hvd.rank() % 2 == 0 else odd


def test_static_sets_from_init_get_ids_in_order():
    r, n = ranks()
    hvd.shutdown()
    first, second = hvd.ProcessSet([0, 1]), hvd.ProcessSet(list(range(1, n)))
    clone, everyone = hvd.ProcessSet([1, 0]), hvd.ProcessSet(list(range(n)))
    hvd.init(process_sets=[first, clone, second, everyone])
    assert (first.process_set_id, second.process_set_id) == (1, 2)
    assert clone.process_set_id is None and everyone.process_set_id is None  # clones, as Horovod
    assert first.size() == 2 and second.size() == n - 1
    assert first.rank() == (r if r < 2 else -1) and first.included() == (r < 2)
    if r < 2:
        got = hvd.allreduce(torch.ones(3), op=hvd.Sum, process_set=first)
        assert torch.equal(got, torch.full((3,), 2.0))
    hvd.shutdown()
    assert first.process_set_id is None  # a new job: the sets are gone
    hvd.init(process_sets="dynamic")


def test_every_collective_on_disjoint_sets(halves):
    r, n = ranks()
    ps = mine(halves)
    members = ps.ranks
    k = len(members)
    x = torch.full((4,), float(r + 1))
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, process_set=ps),
                       torch.full((4,), float(sum(m + 1 for m in members))))
    # Average divides by the set's size (Horovod's rule), as a prescale/postscale pair here.
    assert torch.allclose(hvd.allreduce(x, process_set=ps),
                          torch.full((4,), sum(m + 1 for m in members) / k))
    gathered = hvd.allgather(torch.full((ps.rank() + 1, 2), float(r)), process_set=ps)
    want = torch.cat([torch.full((i + 1, 2), float(m)) for i, m in enumerate(members)])
    assert torch.equal(gathered, want)
    root = members[-1]
    assert torch.equal(hvd.broadcast(torch.full((3,), float(r)), root, process_set=ps),
                       torch.full((3,), float(root)))
    sent = torch.tensor([[float(r * 100 + j)] for j in range(k)])
    received = hvd.alltoall(sent, process_set=ps)
    assert torch.equal(received, torch.tensor([[float(m * 100 + ps.rank())] for m in members]))
    rs = hvd.reducescatter(torch.ones(2 * k, 3), op=hvd.Sum, process_set=ps)
    assert torch.equal(rs, torch.full((2, 3), float(k)))
    g = hvd.grouped_allreduce([torch.ones(2), torch.ones(5)], op=hvd.Sum, process_set=ps)
    assert torch.equal(g[1], torch.full((5,), float(k)))
    hvd.barrier(process_set=ps)
    # The global set still holds every rank.
    assert torch.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum), torch.full((1,), float(n)))


def test_gradients_on_a_set_average_over_the_set(halves):
    ps = mine(halves)
    k = ps.size()
    x = torch.full((3,), float(hvd.rank()), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, process_set=ps)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), float(k)))  # the Sum's gradient, summed over k
    z = torch.ones(2, requires_grad=True)
    hvd.allgather(z.unsqueeze(0), process_set=ps).sum().backward()
    assert torch.allclose(z.grad, torch.ones(2))  # averaged back over the set's k ranks


def test_overlapping_sets_in_opposite_orders():
    r, n = ranks()
    low = hvd.add_process_set(list(range(n - 1)))
    high = hvd.add_process_set(list(range(1, n)))
    for step in range(10):
        order = [low, high] if r % 2 == 0 else [high, low]
        handles = {}
        for ps in order:
            if ps.included():
                handles[ps.process_set_id] = hvd.allreduce_async(
                    torch.full((8,), float(r)), op=hvd.Sum, name="o%d.%d" % (ps.process_set_id, step),
                    process_set=ps)
        for set_id, h in handles.items():
            ps = low if set_id == low.process_set_id else high
            assert torch.equal(hvd.synchronize(h), torch.full((8,), float(sum(ps.ranks))))
    hvd.barrier()
    hvd.remove_process_set(low)
    hvd.remove_process_set(high)


def test_a_set_made_and_removed_while_another_runs():
    r, n = ranks()
    busy = hvd.add_process_set([0, 1])
    pending = None
    if r < 2:
        pending = hvd.allreduce_async(torch.ones(1 << 14), op=hvd.Sum, name="busy", process_set=busy)
    for round_ in range(2):
        other = hvd.add_process_set(list(range(1, n)))
        if other.included():
            got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="other.%d" % round_, process_set=other)
            assert torch.equal(got, torch.full((2,), float(n - 1)))
        assert hvd.remove_process_set(other)
        assert other.process_set_id is None
    if pending is not None:
        assert torch.equal(hvd.synchronize(pending), torch.full((1 << 14,), 2.0))
    assert hvd.remove_process_set(busy)


def test_distributed_optimizer_on_a_set(halves):
    ps = mine(halves)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=ps)
    x = torch.full((2, 4), float(hvd.rank() + 1))
    before = model.weight.detach().clone()
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    # d(sum(W x))/dW = sum of x's rows: 2 * (rank + 1) per entry, averaged over the set.
    mean = np.mean([2.0 * (m + 1) for m in ps.ranks])
    assert torch.allclose(model.weight.detach(), before - 0.1 * mean)


def test_errors_as_horovod_raises_them():
    r, n = ranks()
    pair = hvd.add_process_set([0, 1])
    with pytest.raises(ValueError):
        hvd.add_process_set(pair)  # already added
    with pytest.raises(ValueError, match="already has exactly these ranks"):
        hvd.add_process_set([1, 0])
    with pytest.raises(ValueError, match="not in the job"):
        hvd.add_process_set([0, n])
    assert hvd.remove_process_set(hvd.global_process_set) is False
    if r >= 2:
        with pytest.raises(ValueError, match="rank %d is not in process set" % r):
            hvd.allreduce(torch.ones(1), process_set=pair)
    else:
        with pytest.raises(hvd.HorovodInternalError, match="root rank 2 is not in process set"):
            hvd.broadcast(torch.ones(1), 2, process_set=pair)
        with pytest.raises(hvd.HorovodInternalError, match="rank 1 sent allreduce float32 \\[2\\]"):
            hvd.allreduce(torch.ones(r + 1), name="ps.mismatch", process_set=pair)
        with pytest.raises(ValueError, match="splits has 3 entries for 2 ranks"):
            hvd.alltoall(torch.ones(3), splits=[1, 1, 1], process_set=pair)
    # A removal while rank 0 has a collective in flight on the set is refused on every rank
    # (False), and the set stays usable.
    pending = hvd.allreduce_async(torch.ones(1), op=hvd.Sum, name="pending",
                                  process_set=pair) if r == 0 else None
    assert hvd.remove_process_set(pair) is False and pair.process_set_id is not None
    if r == 1:
        hvd.allreduce(torch.ones(1), op=hvd.Sum, name="pending", process_set=pair)
    if r == 0:
        assert torch.equal(hvd.synchronize(pending), torch.full((1,), 2.0))
    assert hvd.remove_process_set(pair)
    assert not hvd.remove_process_set(pair)  # no longer added: nothing to remove
    with pytest.raises(ValueError, match="has not been added"):
        hvd.allreduce(torch.ones(1), process_set=pair)


def test_distributed_optimizer_outside_its_set_keeps_its_own_gradients():
    # Horovod's rule: a rank outside the optimizer's set reduces nothing and applies its own
    # gradient; the members average among themselves, waiting for no one else.
    r, n = ranks()
    pair = hvd.add_process_set([0, 1])
    w = torch.nn.Parameter(torch.zeros(3))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0),
                                   named_parameters=[("outside_set.w", w)], process_set=pair)
    for _ in range(2):
        opt.zero_grad()
        (w * (r + 1.0)).sum().backward()
        opt.step()
    expected = -2 * (1.5 if r < 2 else r + 1.0)
    assert w.tolist() == [expected] * 3
    hvd.barrier()
    assert hvd.remove_process_set(pair)

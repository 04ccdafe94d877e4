"""One job, many checks, expected errors in between (as a test suite or a notebook runs them
under one init()): after every error a rank raises for a refused or mismatched collective, the
next collectives run on every rank at once. Each check provokes its error, then proves the ranks
are still in step with named and unnamed collectives of every kind. ctest bounds the whole job
(tests/python/CMakeLists.txt): a collective left half-submitted would make a rank wait the op
timeout, past the bound."""
import pytest
import torch

import hvrun.torch as hvd
from hvrun.exceptions import HorovodInternalError


def ranks():
    return hvd.rank(), hvd.size()


def in_step(tag):
    """Named and unnamed collectives of each kind agree on every rank."""
    r, n = ranks()
    total = n * (n + 1) // 2
    assert hvd.allreduce(torch.tensor([r + 1.0]), name="in_step." + tag, op=hvd.Sum).item() == total
    assert hvd.allreduce(torch.tensor([r + 1.0]), op=hvd.Sum).item() == total
    assert hvd.allgather(torch.tensor([r])).tolist() == list(range(n))
    assert hvd.broadcast(torch.tensor([r]), 0).item() == 0
    assert hvd.alltoall(torch.arange(n) + 10 * r).tolist() == [10 * k + r for k in range(n)]
    grouped = hvd.grouped_allreduce([torch.tensor([1.0]), torch.tensor([2.0])], op=hvd.Sum)
    assert [g.item() for g in grouped] == [n, 2.0 * n]


# Each entry provokes one error on every rank; `tag` keeps names apart. Names repeat across
# the repetitions on purpose: a name the previous error left in flight anywhere would be
# refused (or waited for) on some ranks only.

def mismatched_allreduce_shape(name):
    r, _ = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(r + 1), name=name)


def mismatched_allreduce_dtype(name):
    r, _ = ranks()
    dtype = torch.float32 if r == 0 else torch.int32
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(2, dtype=dtype), name=name)


def mismatched_allreduce_op(name):
    r, _ = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(2), name=name, op=hvd.Sum if r == 0 else hvd.Max)


def mismatched_allgather(name):
    r, _ = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.allgather(torch.ones(2, r + 1), name=name)


def mismatched_broadcast_root(name):
    r, _ = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.broadcast(torch.ones(2), r, name=name)


def broadcast_root_out_of_range(name):
    _, n = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.broadcast(torch.ones(2), n + 1, name=name)


def alltoall_bad_splits(name):
    _, n = ranks()
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(n), splits=[1] * (n + 1), name=name)


def alltoall_refused_differently_per_rank(name):
    # Rank 0's splits are refused before anything is named; the others' tensor is refused
    # after: unnamed alltoalls that follow must still get the same names on every rank.
    r, n = ranks()
    if r == 0:
        with pytest.raises(ValueError):
            hvd.alltoall(torch.ones(n), splits=[-1] + [1] * n)
    else:
        with pytest.raises(TypeError):
            hvd.alltoall(torch.ones(n, dtype=torch.complex64))


def mismatched_alltoall_dtype(name):
    r, n = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.alltoall(torch.ones(n, dtype=torch.float32 if r == 0 else torch.float64), name=name)


def reducescatter_adasum(name):
    _, n = ranks()
    with pytest.raises(RuntimeError, match="Adasum"):
        hvd.reducescatter(torch.ones(n), name=name, op=hvd.Adasum)


def mismatched_reducescatter(name):
    r, n = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.reducescatter(torch.ones(n, r + 1), name=name, op=hvd.Sum)


def grouped_allreduce_mismatched(name):
    # Every member differs between ranks.
    r, _ = ranks()
    with pytest.raises(HorovodInternalError):
        hvd.grouped_allreduce([torch.ones(r + 1), torch.ones(r + 3), torch.ones(2 * r + 1)],
                              name=name)


def grouped_allreduce_partly_mismatched(name):
    # Only the middle member differs: the group completes at once on every rank (the others
    # run, as in Horovod), the error names that member, and the same names work again at once.
    r, n = ranks()
    with pytest.raises(HorovodInternalError, match=r"'grouped_allreduce\.%s\.1'" % name):
        hvd.grouped_allreduce([torch.ones(2), torch.ones(r + 1), torch.ones(3)], name=name,
                              op=hvd.Sum)
    again = hvd.grouped_allreduce([torch.ones(2), torch.ones(1), torch.ones(3)], name=name,
                                  op=hvd.Sum)
    assert [t.tolist() for t in again] == [[n] * 2, [n], [n] * 3]


def broadcast_parameters_one_mismatched(name):
    r, _ = ranks()
    params = [(name + ".a", torch.ones(r + 1)), (name + ".b", torch.ones(3)),
              (name + ".c", torch.ones(4))]
    with pytest.raises(HorovodInternalError):
        hvd.broadcast_parameters(params, root_rank=0)


def optimizer_step_with_a_mismatched_gradient(name):
    # The ranks' scale factors differ (gradient_predivide_factor): that step fails on every
    # rank, and the optimizer's next step, with the same factors everywhere, runs.
    r, n = ranks()
    w = torch.nn.Parameter(torch.ones(2))
    v = torch.nn.Parameter(torch.ones(3))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w, v], lr=0.1),
                                   named_parameters=[(name + ".w", w), (name + ".v", v)],
                                   gradient_predivide_factor=1.0 + r)
    (w.sum() + v.sum()).backward()
    with pytest.raises(HorovodInternalError):
        opt.step()
    opt.gradient_predivide_factor = 1.0
    opt.zero_grad()
    ((w * (r + 1.0)).sum() + v.sum()).backward()
    opt.step()
    assert w.grad.tolist() == [(n + 1) / 2] * 2
    assert v.grad.tolist() == [1.0] * 3


def duplicate_name_in_flight(name):
    handle = hvd.allreduce_async(torch.ones(2), name=name)
    with pytest.raises(ValueError, match="same name"):
        hvd.allreduce_async(torch.ones(2), name=name)
    hvd.synchronize(handle)


CHECKS = [mismatched_allreduce_shape, mismatched_allreduce_dtype, mismatched_allreduce_op,
          mismatched_allgather, mismatched_broadcast_root, broadcast_root_out_of_range,
          alltoall_bad_splits, alltoall_refused_differently_per_rank, mismatched_alltoall_dtype,
          reducescatter_adasum, mismatched_reducescatter, grouped_allreduce_mismatched,
          grouped_allreduce_partly_mismatched,
          broadcast_parameters_one_mismatched, optimizer_step_with_a_mismatched_gradient,
          duplicate_name_in_flight]
REPEATS = 4


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_next_collectives_run_after_the_error(check, repeat):
    check("after_errors." + check.__name__)
    in_step("%s.%d" % (check.__name__, repeat))


def test_enough_checks():
    assert len(CHECKS) * REPEATS >= 50

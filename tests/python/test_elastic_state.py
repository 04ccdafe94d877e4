"""hvrun.torch.elastic and hvrun.elastic, run by every rank of a fixed hvrun job: TorchState and
ObjectState commit/restore/sync, ElasticSampler's partitions (including a simulated change of
size), the agreement on added hosts, and run()'s loop (outside an elastic job, with a fake
reset, and with real resets: every rank leaving and rejoining the job)."""
import pytest
import torch

import hvrun
import hvrun.elastic
import hvrun.torch as hvd
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from elastic_run_checks import RecordingState, check_run_outside_elastic_job


def ranks():
    return hvd.rank(), hvd.size()


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))


def train_step(model, optimizer, seed):
    torch.manual_seed(1000 + seed)
    model.train()
    optimizer.zero_grad()
    model(torch.randn(8, 4)).pow(2).sum().backward()
    optimizer.step()


def snapshot(model, optimizer):
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    opt_tensors = {(pid, key): v.detach().clone() for pid, s in opt["state"].items()
                   for key, v in s.items() if isinstance(v, torch.Tensor)}
    return params, opt_tensors, [dict((k, v) for k, v in g.items() if k != "params")
                                 for g in opt["param_groups"]]


def assert_same(a, b):
    params_a, opt_a, groups_a = a
    params_b, opt_b, groups_b = b
    assert params_a.keys() == params_b.keys()
    for k in params_a:
        assert torch.equal(params_a[k], params_b[k]), k
    assert opt_a.keys() == opt_b.keys()
    for k in opt_a:
        assert torch.equal(opt_a[k], opt_b[k]), k
    assert groups_a == groups_b


def gathered_equal(tensor):
    """Every rank's `tensor` is rank 0's."""
    everyone = hvd.allgather_object(tensor.detach().clone(), name="test.elastic.gathered")
    return all(torch.equal(t, everyone[0]) for t in everyone)


# ---- layout

def test_module_layout():
    import hvrun.torch.elastic
    assert hvd.elastic is hvrun.torch.elastic
    assert callable(hvd.elastic.run)
    for name in ("TorchState", "ObjectState", "ElasticSampler", "State"):
        assert hasattr(hvd.elastic, name), name
    assert issubclass(hvd.elastic.TorchState, hvrun.elastic.State)
    assert issubclass(hvd.elastic.ObjectState, hvrun.elastic.ObjectState)
    assert issubclass(hvd.elastic.ElasticSampler, torch.utils.data.Sampler)


# ---- TorchState

@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_torch_state_commit_restore_round_trip(opt):
    r, _ = ranks()
    model = make_model(r)
    if opt == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train_step(model, optimizer, 0)
    state = hvd.elastic.TorchState(model, optimizer, epoch=3, extra={"seen": [1, 2]})
    state.commit()  # save + the agreement on added hosts (none): must not raise
    committed = snapshot(model, optimizer)

    train_step(model, optimizer, 1)
    state.epoch = 7
    state.extra["seen"].append(3)
    with torch.no_grad():
        model[1].running_mean.add_(5.0)  # buffers are state too
    after = snapshot(model, optimizer)
    assert not torch.equal(after[0]["0.weight"], committed[0]["0.weight"])  # training moved it

    state.restore()
    assert_same(snapshot(model, optimizer), committed)
    assert state.epoch == 3 and state.extra == {"seen": [1, 2]}
    # The saved copy is independent of what training does after a restore: restoring twice
    # gives the committed values again.
    train_step(model, optimizer, 2)
    state.extra["seen"].append(4)
    state.restore()
    assert_same(snapshot(model, optimizer), committed)
    assert state.extra == {"seen": [1, 2]}
    assert state.model is model and state.optimizer is optimizer


def test_torch_state_saved_copy_is_on_cpu_and_unaliased():
    model = make_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_step(model, optimizer, 0)
    state = hvd.elastic.TorchState(model, optimizer)
    saved = state._handlers["model"]._saved
    live = model.state_dict()
    for k, v in saved.items():
        assert v.device.type == "cpu"
        assert v.data_ptr() != live[k].data_ptr()
    for s in state._handlers["optimizer"]._saved["state"].values():
        for v in s.values():
            if isinstance(v, torch.Tensor):
                assert all(v.data_ptr() != t.data_ptr()
                           for ps in optimizer.state.values() for t in ps.values()
                           if isinstance(t, torch.Tensor))


def test_torch_state_sync_gives_every_rank_rank0s_state():
    r, n = ranks()
    model = make_model(r)  # different on every rank
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_step(model, optimizer, r)
    state = hvd.elastic.TorchState(model, optimizer, epoch=10 * r + 1, tag="rank%d" % r)
    state.sync()

    # Rank 0's state, rebuilt here: the same seeds give the same values.
    ref_model = make_model(0)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
    train_step(ref_model, ref_opt, 0)
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_opt))
    assert state.epoch == 1 and state.tag == "rank0"
    assert gathered_equal(model[0].weight)

    # sync() saved: a restore right after it gives the synced state.
    train_step(model, optimizer, 5)
    state.epoch = 99
    state.restore()
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_opt))
    assert state.epoch == 1


def test_torch_state_sync_to_fresh_optimizer_keeps_rank0s_parameters():
    # A rank that just joined has an optimizer without state; its zero step (with weight decay,
    # which moves parameters) must not leave its parameters different from rank 0's.
    r, _ = ranks()
    model = make_model(r)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.1)
    if r == 0:
        train_step(model, optimizer, 0)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer)
    state.sync()
    ref_model = make_model(0)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.1)
    train_step(ref_model, ref_opt, 0)
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_opt))


def test_torch_state_assignment_replaces_held_model():
    model_a, model_b = make_model(0), make_model(1)
    state = hvd.elastic.TorchState(model=model_a)
    state.model = model_b
    state.commit()
    expected = model_b[0].weight.detach().clone()
    with torch.no_grad():
        model_b[0].weight.zero_()
    state.restore()
    assert torch.equal(model_b[0].weight, expected)
    assert state.optimizer is None


# ---- ObjectState

def test_object_state_commit_restore_sync():
    r, _ = ranks()
    state = hvd.elastic.ObjectState(epoch=r, names=["r%d" % r])
    state.commit()
    state.epoch = 50
    state.names.append("x")
    state.restore()
    assert state.epoch == r and state.names == ["r%d" % r]
    state.names.append("y")  # not committed: sync sends current values
    state.sync()
    assert state.epoch == 0 and state.names == ["r0", "y"]
    state.epoch = 9
    state.restore()  # sync saved
    assert state.epoch == 0 and state.names == ["r0", "y"]


def test_neutral_object_state_with_numpy_collectives():
    r, _ = ranks()
    state = hvrun.elastic.ObjectState(step=r + 100, table={"rank": r})
    state.sync()
    assert state.step == 100 and state.table == {"rank": 0}
    state.commit()
    state.step = 1
    state.restore()
    assert state.step == 100


# ---- the agreement on added hosts

def test_check_host_updates_without_update_does_not_raise():
    assert hvrun.elastic.local_hosts_updated() is False
    state = hvd.elastic.ObjectState(x=1)
    state.check_host_updates()
    state.commit()
    hvrun.elastic.ObjectState(x=1).commit()  # the NumPy agreement too


def test_hosts_update_seen_by_one_rank_interrupts_every_rank(monkeypatch):
    r, n = ranks()
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: r == n - 1)
    state = hvd.elastic.ObjectState(x=r)
    state.x = 42
    with pytest.raises(HostsUpdatedInterrupt) as info:
        state.commit()
    assert info.value.skip_sync is False
    state.x = 0
    state.restore()
    assert state.x == 42  # commit saved before it raised
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: False)
    state.commit()


# ---- ElasticSampler

class Dataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


@pytest.mark.parametrize("length", [12, 23, 2])
def test_sampler_partitions_disjoint_and_complete(length):
    r, n = ranks()
    sampler = hvd.elastic.ElasticSampler(Dataset(length), seed=5)
    mine = list(sampler)
    assert len(sampler) == len(mine) == -(-length // n)
    everyone = hvd.allgather_object(mine, name="test.elastic.partition")
    flat = [i for part in everyone for i in part]
    assert set(flat) == set(range(length))
    assert len(flat) - length == (-length) % n  # only the padding repeats
    if length % n == 0:
        assert len(set(flat)) == len(flat)
    # Every rank computed the same partition for every rank.
    for other in range(n):
        assert everyone[other] == hvd.elastic.partition_indices(length, set(), 0, other, n, seed=5)


def test_sampler_shuffle_is_deterministic_per_seed_and_epoch():
    a = hvd.elastic.partition_indices(50, set(), epoch=3, rank=0, size=1, seed=7)
    assert a == hvd.elastic.partition_indices(50, set(), epoch=3, rank=0, size=1, seed=7)
    assert a != hvd.elastic.partition_indices(50, set(), epoch=4, rank=0, size=1, seed=7)
    assert sorted(a) == list(range(50)) and a != list(range(50))
    assert hvd.elastic.partition_indices(5, set(), 3, 1, 2, shuffle=False) == [1, 3, 0]
    sampler = hvd.elastic.ElasticSampler(Dataset(50), seed=7)
    sampler.set_epoch(3)
    everyone = hvd.allgather_object(list(sampler), name="test.elastic.shuffle")
    r, n = ranks()
    assert everyone == [hvd.elastic.partition_indices(50, set(), 3, k, n, seed=7) for k in range(n)]


def test_sampler_state_dict_round_trip():
    r, n = ranks()
    sampler = hvd.elastic.ElasticSampler(Dataset(40), seed=1)
    sampler.set_epoch(2)
    order = list(sampler)
    sampler.record_batch(0, 3)
    sampler.record_batch(1, 3)
    assert sampler.processed_indices == set(order[:6])
    saved = sampler.state_dict()
    other = hvd.elastic.ElasticSampler(Dataset(40), seed=1)
    other.load_state_dict(saved)
    assert other.epoch == 2 and other.processed_indices == set(order[:6])
    assert not set(other) & set(order[:6])
    sampler.record_indices([39, 38])
    assert other.processed_indices == set(order[:6])  # a copy, not shared
    sampler.set_epoch(3)
    assert sampler.processed_indices == set() and sampler.epoch == 3


def simulate_epoch_with_resize(length, sizes, batches_before_each_change, batch, seed=3, epoch=4):
    """Runs one epoch of ElasticSamplers through changes of size (no job involved: each rank's
    sampler is given its rank and size). Returns (what every rank processed, in order)."""
    processed_everywhere = []
    agreed = set()  # the union a sync makes
    for step, size in enumerate(sizes):
        samplers = []
        for rank in range(size):
            s = hvd.elastic.ElasticSampler(Dataset(length), seed=seed)
            s.epoch = epoch
            s.processed_indices = set(agreed)
            s.reset(rank=rank, num_replicas=size)
            samplers.append(s)
        last = step == len(sizes) - 1
        for s in samplers:
            order = list(s)
            count = len(order) if last else min(len(order), batches_before_each_change * batch)
            for b in range(-(-count // batch)):
                got = s.get_indices(b, batch)[:max(0, count - b * batch)]
                processed_everywhere.extend(got)
                s.record_indices(got)
        for s in samplers:
            agreed |= s.processed_indices
    return processed_everywhere


@pytest.mark.parametrize("length", [30, 31, 7])
def test_sampler_size_change_neither_repeats_nor_skips(length):
    for sizes in ([3, 2], [2, 3], [3, 2, 1], [1, 4]):
        seen = simulate_epoch_with_resize(length, sizes, batches_before_each_change=2, batch=2)
        assert set(seen) == set(range(length)), (sizes, length)  # nothing skipped
        # Repeats come only from padding, at most size - 1 per partition.
        assert len(seen) - length <= sum(s - 1 for s in sizes), (sizes, length)
    # Sizes that divide what remains: no padding, so not a single repeat.
    seen = simulate_epoch_with_resize(30, [3, 2], batches_before_each_change=2, batch=2)
    assert sorted(seen) == list(range(30))


def test_sampler_partition_excludes_processed_after_resize():
    # 3 ranks processed 2 samples each, then the job shrinks to 2.
    length, done = 24, set()
    for rank in range(3):
        done |= set(hvd.elastic.partition_indices(length, set(), 0, rank, 3, seed=9)[:2])
    assert len(done) == 6
    parts = [hvd.elastic.partition_indices(length, done, 0, rank, 2, seed=9) for rank in range(2)]
    assert len(parts[0]) == len(parts[1]) == 9
    assert not (set(parts[0]) & set(parts[1])) and not (set(parts[0] + parts[1]) & done)
    assert set(parts[0]) | set(parts[1]) | done == set(range(length))


def test_torch_state_sync_merges_sampler_progress():
    r, n = ranks()
    sampler = hvd.elastic.ElasticSampler(Dataset(36), seed=2)
    state = hvd.elastic.TorchState(sampler=sampler, epoch=0)
    state.sync()
    mine = list(sampler)
    sampler.record_batch(0, 2)  # each rank processed its first two samples
    everyone_done = set()
    for part in hvd.allgather_object(mine[:2], name="test.elastic.done"):
        everyone_done |= set(part)
    assert len(everyone_done) == 2 * n
    state.sync()
    assert sampler.processed_indices == everyone_done
    remaining = hvd.allgather_object(list(sampler), name="test.elastic.remaining")
    flat = [i for part in remaining for i in part]
    assert not set(flat) & everyone_done
    assert set(flat) | everyone_done == set(range(36))
    # Restore goes back to the last commit (the sync saved the merged set).
    sampler.record_batch(0, 2)
    state.restore()
    assert sampler.processed_indices == everyone_done


def test_sampler_sync_ignores_ranks_in_another_epoch():
    r, n = ranks()
    sampler = hvd.elastic.ElasticSampler(Dataset(20))
    if r != 0:
        sampler.set_epoch(5)  # as a rank that joined with other progress
    sampler.record_indices([r])
    state = hvd.elastic.TorchState(sampler=sampler)
    state.sync()
    assert sampler.epoch == 0
    assert sampler.processed_indices == {0}


# ---- run()

def test_run_outside_elastic_job_calls_once_and_propagates(monkeypatch):
    check_run_outside_elastic_job(hvd.elastic.run, monkeypatch)


def test_run_loop_in_elastic_job_with_fake_reset(monkeypatch):
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    state = RecordingState()
    state.register_reset_callbacks([lambda: state.calls.append("callback")])
    outcomes = [HorovodInternalError("peer lost"), HostsUpdatedInterrupt(skip_sync=True),
                HostsUpdatedInterrupt(skip_sync=False), "done"]

    def train(state, value):
        state.calls.append("func")
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome + value

    wrapped = hvrun.elastic.run_fn(train, reset=lambda: state.calls.append("reset"))
    assert wrapped(state, "!") == "done!"
    assert state.calls == [
        "sync", "func",
        "restore", "reset", "callback", "sync", "func",  # HorovodInternalError
        "reset", "callback", "func",                      # hosts updated, skip_sync
        "reset", "callback", "sync", "func"]              # hosts updated


def test_run_in_elastic_job_ends_when_reset_fails(monkeypatch):
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    state = RecordingState()
    calls = []

    def reset():
        raise hvrun.HvrunError("hvrun init failed: no membership")

    def train(state):
        calls.append(1)
        raise HorovodInternalError("peer lost")

    with pytest.raises(hvrun.HvrunError, match="no membership"):
        hvrun.elastic.run_fn(train, reset=reset)(state)
    assert calls == [1] and state.calls == ["sync", "restore"]


def test_run_elastic_resets_rejoin_the_job(monkeypatch):
    # Every rank fails at the same point (as a lost peer makes them), then one rank hears that
    # hosts were added: hvd.elastic.run must restore, really leave and rejoin the job
    # (shutdown, init) twice, run the callbacks, sync, and keep what was committed.
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    r, n = ranks()
    model = make_model(r)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sampler = hvd.elastic.ElasticSampler(Dataset(24), seed=4)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, attempts=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append((hvd.rank(), hvd.size()))])
    updates = {"seen": False}
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated",
                        lambda: updates["seen"] and r == 0)
    calls = []
    synced_weights = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        state.attempts += 1
        synced_weights.append(gathered_equal(state.model[0].weight))  # the sync made them agree
        train_step(state.model, state.optimizer, len(calls))
        state.sampler.record_batch(0, 1)
        if len(calls) == 1:
            state.epoch = 5  # not committed: the restore takes it back
            raise HorovodInternalError("simulated lost peer")
        if len(calls) == 2:
            state.epoch = 1
            updates["seen"] = True
            state.commit()  # raises HostsUpdatedInterrupt on every rank
            raise AssertionError("commit did not raise")
        updates["seen"] = False
        state.commit()
        return state.epoch

    assert train(state) == 1
    assert len(calls) == 3 and synced_weights == [True, True, True]
    assert hvd.is_initialized() and hvd.size() == n and hvd.rank() == r
    assert resets == [(r, n), (r, n)]
    # The first call's increment was rolled back; the second's was committed and kept.
    assert state.attempts == 2 and state.epoch == 1
    assert gathered_equal(model[0].weight)
    # The first call's sample was rolled back; the second's (one per rank) merged at the sync
    # after the hosts update; the third call's own sample added locally.
    assert len(sampler.processed_indices) == n + 1
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n  # the job works afterwards

"""Horovod's elastic API for PyTorch (horovod.torch.elastic) on hvrun.

    import hvrun.torch as hvd
    hvd.init()
    sampler = hvd.elastic.ElasticSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=bs, sampler=sampler)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    state.register_reset_callbacks([lambda: scale_lr(optimizer, hvd.size())])

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for idx, (x, y) in enumerate(loader):   # idx counts from the last reset
                ...step...
                state.sampler.record_batch(idx, bs)
                if idx % 10 == 9:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)     # at the end of an epoch, not its start
            state.commit()

    train(state)

Run it as an elastic job (its launcher sets HVRUN_ELASTIC=1 in every worker); elsewhere
run() calls the function once and lets its errors through. A reset calls hvd.init() without
arguments: process sets given to the first init() are not added again.
"""
from hvrun.elastic import State, is_elastic, run_fn
from hvrun.torch.elastic.sampler import ElasticSampler, partition_indices
from hvrun.torch.elastic.state import ObjectState, TorchState


def _reset():
    # hvrun.torch's own shutdown/init: they also refresh the global process set and the layout.
    from hvrun.torch.mpi_ops import init, shutdown
    shutdown()
    init()


def run(func):
    """Decorator for the training function `func(state, *args, **kwargs)` (Horovod's
    hvd.elastic.run). In an elastic job (HVRUN_ELASTIC=1) it syncs the state, calls `func`,
    and when a collective fails (HorovodInternalError: a peer died or the membership changed)
    restores the state to its last commit; when hosts were added (HostsUpdatedInterrupt, raised
    by state.commit() on every rank) it keeps the state. Either way it then leaves and rejoins
    the job (hvd.shutdown(); hvd.init(), which waits for the new membership: rank and size may
    change), calls state.on_reset() (the reset callbacks), syncs again and calls `func` again.
    A failing hvd.init() ends it with that error. Outside an elastic job `func` runs once after
    state.sync() and its errors propagate: a fixed job cannot re-form around a lost rank."""
    return run_fn(func, _reset)


__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler", "partition_indices",
           "is_elastic"]

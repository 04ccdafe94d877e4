"""Elastic training, framework-neutral part (Horovod's horovod.common.elastic on hvrun).

A training function wrapped by :func:`run` survives membership changes of an elastic job
(one whose launcher sets ``HVRUN_ELASTIC=1`` in every worker):

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()          # keep a copy; raise at once on every rank if hosts were added

    train(state)

When a collective fails (a peer died, the membership changed) every survivor rolls its state
back to the last commit, leaves the old membership, joins the new one (``init()`` returns once
the new set of ranks has met) and calls the function again after a sync, which gives every rank
rank 0's state. Rank 0 of the new membership is the oldest surviving rank, so the state that
wins is one that lived through the change. Added hosts are noticed at ``commit()``: every rank
raises :class:`HostsUpdatedInterrupt` at the same commit, keeps its current state and re-forms
the job with the newcomers, which get the state from the sync.

Every rank must call ``commit()`` (and ``check_host_updates()``) equally often: each one is a
collective.

The frameworks (hvrun.torch.elastic) plug in their own collectives; the defaults here use the
NumPy package's, so this module also works for a trainer that uses plain ``hvrun``.
"""
import copy
import functools

from hvrun import _state
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# The collective every commit makes: one int per rank, reduced with Max.
HOSTS_UPDATED_NAME = "hvrun.elastic.hosts_updated"
_OBJECT_STATE_NAME = "hvrun.elastic.object_state"


def is_elastic():
    """True inside an elastic job (the launcher sets HVRUN_ELASTIC=1)."""
    return _state.in_elastic_job()


def local_hosts_updated():
    """Whether the coordinator told this worker that hosts were added since its init()."""
    worker = _state.worker()
    # Built without elastic support the worker has no such query: then nothing is ever added.
    query = getattr(worker, "hosts_updated", None)
    return bool(query()) if query is not None else False


def _numpy_any_rank(flag, name=HOSTS_UPDATED_NAME):
    import numpy as np

    from hvrun import _tensors, numpy_ops
    total = numpy_ops.allreduce(np.array([1 if flag else 0], dtype=np.int32), op=_tensors.Max,
                                name=name)
    return int(total[0]) != 0


def _numpy_broadcast_object(obj, root_rank=0, name=_OBJECT_STATE_NAME):
    import numpy as np

    from hvrun import _object_wire, numpy_ops
    # One allgather to which only the root contributes (see hvrun._object_wire).
    is_root = _state.worker().rank == root_rank
    payload = np.frombuffer(_object_wire.dumps(obj) if is_root else b"", dtype=np.uint8).copy()
    data = numpy_ops.allgather(payload, name + ".obj")
    return obj if is_root else _object_wire.loads(data.tobytes())


class State:
    """What a training function keeps across membership changes.

    Subclasses define save() (keep a copy in memory), restore() (go back to it) and sync() (make
    every rank's state rank 0's). `any_rank(flag)` returns True on every rank when `flag` is
    True on one of them (a Max allreduce); `bcast_object(obj, root_rank=0, name=...)` returns
    root_rank's object. Both are collectives; a framework passes its own (or overrides the
    methods _any_rank / _broadcast_object), the defaults use hvrun's NumPy collectives."""

    def __init__(self, bcast_object=None, any_rank=None):
        self._bcast_object_fn = bcast_object
        self._any_rank_fn = any_rank
        self._reset_callbacks = []

    def _any_rank(self, flag):
        if self._any_rank_fn is not None:
            return bool(self._any_rank_fn(bool(flag)))
        return _numpy_any_rank(bool(flag))

    def _broadcast_object(self, obj, name):
        if self._bcast_object_fn is not None:
            return self._bcast_object_fn(obj, root_rank=0, name=name)
        return _numpy_broadcast_object(obj, 0, name)

    def register_reset_callbacks(self, callbacks):
        """Functions called (in order, without arguments) after every reset, once the new
        membership is up and before the state is synced: e.g. to scale the learning rate by the
        new size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """run() calls it after a reset: the subclass's reset() first, then the callbacks."""
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def reset(self):
        """Hook for subclasses: refresh what depends on the membership (rank, size)."""

    def warm_up(self):
        """Hook for subclasses: a hot spare calls it before it parks, while the job trains, to
        make what its first sync() would otherwise make with every rank waiting (no
        collective: it has no rank yet)."""

    def commit(self):
        """Keeps a copy of the state (save()), then check_host_updates(). A collective: every
        rank commits at the same points of training."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when any rank heard that hosts were added.

        The coordinator's news reaches the workers at different moments; agreeing on it with a
        collective makes every rank leave training at the same commit, so none is left waiting
        in a collective the others never start."""
        if self._any_rank(local_hosts_updated()):
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()


class ObjectState(State):
    """State made of plain attributes: ObjectState(epoch=0, batch=0) has state.epoch, state.batch.

    save() keeps a deep copy of every attribute, restore() puts copies of those back, sync()
    gives every rank rank 0's current values (then saves them). Values must pickle.
    `bcast_object` and `any_rank` are the collectives (see State); they are not attributes."""

    def __init__(self, bcast_object=None, any_rank=None, **kwargs):
        super().__init__(bcast_object=bcast_object, any_rank=any_rank)
        self._object_names = list(kwargs)
        self._saved_objects = copy.deepcopy(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)

    def _current_objects(self):
        return {name: getattr(self, name) for name in self._object_names}

    def save(self):
        self._saved_objects = copy.deepcopy(self._current_objects())

    def restore(self):
        # A copy, so that training on the restored values cannot change the saved ones.
        for name, value in copy.deepcopy(self._saved_objects).items():
            setattr(self, name, value)

    def sync(self):
        if self._object_names:
            values = self._broadcast_object(self._current_objects(), _OBJECT_STATE_NAME)
            for name, value in values.items():
                setattr(self, name, value)
        self.save()


# Errors of the program itself (tensors whose shapes differ between ranks, a call hvrun refuses):
# a reset would meet them again, so run() lets them through instead of resetting for ever.
_NOT_RESET_FOR = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "UNIMPLEMENTED",
                            "NOT_FOUND", "ALREADY_EXISTS"})


def _default_reset():
    _state.shutdown()
    _state.init()


def run_fn(func, reset=_default_reset):
    """Wraps `func(state, *args, **kwargs)` in the elastic loop; `reset()` leaves the job and
    joins its new membership (shutdown(); init())."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not is_elastic():
            # A fixed job: a lost rank ends it, so a reset could never succeed. Errors go to the
            # caller as they would without the decorator.
            state.sync()
            return func(state, *args, **kwargs)
        if _state.is_parked_spare():
            # A hot spare: its start-up is done; now it registers and waits for a lost rank's
            # place, then joins the new membership as a reset's survivors do.
            state.warm_up()
            reset()
            state.on_reset()
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                if getattr(e, "code", None) in _NOT_RESET_FOR:
                    raise
                # Some collective failed part-way: what this rank holds may be half-updated.
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                # Raised at a commit on every rank alike: the state is whole and consistent.
                skip_sync = e.skip_sync
            # init() raises (HvrunError) when no new membership forms: the job is over then.
            reset()
            state.on_reset()

    return wrapper


def run(func):
    """Decorator: runs `func(state, ...)` and, in an elastic job (HVRUN_ELASTIC=1), again after
    every membership change: on HorovodInternalError (a lost peer, a changed membership; not an
    error of the program itself such as tensors whose shapes differ between ranks, which is
    raised) the state is restored to its last commit,
    on HostsUpdatedInterrupt it is kept; then hvrun.shutdown(), hvrun.init() (blocks until the
    new membership has met; rank and size may change), state.on_reset(), state.sync() and
    `func` again. Outside an elastic job `func` runs once after state.sync() and its errors
    propagate (a lost rank ends a fixed job, so there is nothing to reset into)."""
    return run_fn(func, _default_reset)


__all__ = ["State", "ObjectState", "run", "run_fn", "is_elastic", "local_hosts_updated",
           "HOSTS_UPDATED_NAME"]

"""Horovod's process sets (hvrun.torch and hvrun.tensorflow): collectives among some ranks.

`ProcessSet(ranks)` names ranks; `add_process_set` makes it a set of the job (every rank calls
it, in the same order, as Horovod's dynamic process sets require) and gives it an id;
`remove_process_set` ends it. Sets given to `init(process_sets=[...])` are added right after
init, in their order (ids 1, 2, ...), as Horovod's static sets are. hvrun always allows adding
and removing sets after init, so `HOROVOD_DYNAMIC_PROCESS_SETS` is not needed. An MPI
communicator is refused: hvrun's data planes are not MPI's.
"""
from hvrun import _state


class ProcessSet:
    """A set of ranks running collectives together (Horovod's `hvd.ProcessSet`)."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm=None):
        if ranks_or_comm is None:
            return
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process ranks or an "
                             "mpi4py Comm object; hvrun is not built with MPI, so only a list of "
                             "ranks is accepted (got %s)" % type(ranks_or_comm).__name__)
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks or an "
                             "mpi4py Comm object (got %r)" % (ranks_or_comm,))
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """Ranks in the set; None before it was added."""
        if self.process_set_id is None:
            return None
        if self.process_set_id == 0:
            return _state.worker().size
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set (-1 outside it); None before it was added."""
        if self.process_set_id is None:
            return None
        if self.process_set_id == 0:
            return _state.worker().rank
        me = _state.worker().rank
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """Whether this process is in the set's ranks; None without ranks (as Horovod's)."""
        if self.ranks is None:
            return None
        return _state.worker().rank in self.ranks

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet()
global_process_set.process_set_id = 0

_added = {}  # id -> the ProcessSet object the caller holds


def set_global_ranks(size):
    """init(): the global set holds every rank, as in Horovod (None again after shutdown, when
    every added set is gone too)."""
    global_process_set.ranks = None if size is None else list(range(size))
    if size is None:
        for process_set in _added.values():
            process_set._invalidate()
        _added.clear()


def add_process_set(process_set):
    """Adds a set of the job (a ProcessSet or a list of ranks) and returns it with its id.
    Every rank must call it, in the same order, with the same ranks."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("Process set already added: %r" % (process_set,))
    if process_set.ranks is None:
        raise ValueError("add_process_set: the process set names no ranks")
    new_id = _state.worker().add_process_set(process_set.ranks)
    process_set.process_set_id = new_id
    _added[new_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a set added before; every rank must call it, in the same order. True when it
    was removed (the object is then invalidated); False, as Horovod, for the global set, a set
    never added, and a removal the job refused (collectives still in flight on the set: the
    set and the object stay usable, where Horovod would invalidate the object anyway)."""
    if process_set.process_set_id in (None, 0):
        return False
    try:
        _state.worker().remove_process_set(process_set.process_set_id)
    except ValueError as refused:
        import logging
        logging.getLogger("hvrun").warning("remove_process_set: %s", refused)
        return False
    _added.pop(process_set.process_set_id, None)
    process_set._invalidate()
    return True


def check_initial_process_sets(process_sets):
    """init(process_sets=...) takes Horovod's static sets (a list) or "dynamic"; ValueError
    otherwise, before anything starts."""
    if process_sets in (None, "dynamic"):
        return
    if isinstance(process_sets, (str, bytes)) or not hasattr(process_sets, "__iter__"):
        raise ValueError("init(process_sets=...) takes a list of ProcessSet objects (or of rank "
                         "lists) or \"dynamic\", not %r" % (process_sets,))


def add_initial_process_sets(process_sets):
    """init(process_sets=...): adds Horovod's static sets in their order (ids 1, 2, ...)."""
    check_initial_process_sets(process_sets)
    if process_sets in (None, "dynamic"):
        return
    # As Horovod: a set whose ranks are the global set's, or repeat an earlier entry's, is a
    # clone and stays invalid (process_set_id None) instead of failing init.
    seen = {tuple(global_process_set.ranks or [])}
    for process_set in process_sets:
        if not isinstance(process_set, ProcessSet):
            process_set = ProcessSet(process_set)
        if process_set.ranks is not None and tuple(process_set.ranks) in seen:
            process_set._invalidate()
            continue
        add_process_set(process_set)
        seen.add(tuple(process_set.ranks))


def process_set_id(process_set):
    """The id a collective runs on: 0 for the global set, else the id of an added set this
    rank belongs to (ValueError otherwise, as Horovod raises)."""
    if process_set is None or process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet (got %s)" % type(process_set).__name__)
    if process_set.process_set_id is None:
        raise ValueError("Process set %r has not been added (hvd.add_process_set) or was removed"
                         % (process_set,))
    if not process_set.included():
        raise ValueError("rank %d is not in process set %d (ranks %s); only its members run its "
                         "collectives" % (_state.worker().rank, process_set.process_set_id,
                                          ", ".join(str(r) for r in process_set.ranks)))
    return process_set.process_set_id


def process_set_size(process_set):
    """Ranks taking part in a collective on `process_set` (Average divides by it)."""
    if process_set is None or process_set is global_process_set:
        return _state.worker().size
    return process_set.size()


def process_set_of_id(process_set_id):
    """The ProcessSet an op's process_set_id attribute names (gradients run on the op's set)."""
    if process_set_id == 0:
        return global_process_set
    if process_set_id not in _added:
        raise ValueError("There is no process set %d (never added, or removed)" % process_set_id)
    return _added[process_set_id]

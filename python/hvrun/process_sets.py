"""Horovod's ProcessSet objects (hvrun.torch and hvrun.tensorflow); hvrun runs every collective
on the global set.

`ProcessSet(ranks_or_comm)` takes Horovod's argument (a list of ranks; an MPI communicator needs
an MPI build, which hvrun's data planes are not). `global_process_set.ranks` is every rank once
init() ran, as in Horovod. Sets other than the global one are refused where they are used.
"""
from hvrun import _state


class ProcessSet:
    """A set of ranks running collectives together; hvrun has the global one only."""

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
        if any(not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks or an "
                             "mpi4py Comm object (got %r)" % (ranks_or_comm,))
        self.ranks = ranks

    def size(self):
        if self.process_set_id is None:
            return None
        return _state.worker().size

    def rank(self):
        if self.process_set_id is None:
            return None
        return _state.worker().rank

    def included(self):
        if self.ranks is None:
            return None
        return _state.worker().rank in self.ranks

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet()
global_process_set.process_set_id = 0


def set_global_ranks(size):
    """init(): the global set holds every rank, as in Horovod (None again after shutdown)."""
    global_process_set.ranks = None if size is None else list(range(size))


def add_process_set(process_set):
    raise NotImplementedError("hvrun supports only the global process set")


def remove_process_set(process_set):
    raise NotImplementedError("hvrun supports only the global process set")


def check_process_set(process_set):
    """The set a collective runs on: the global one, or a set naming every rank."""
    if process_set is None or process_set is global_process_set:
        return
    if process_set.ranks is not None and process_set.ranks == global_process_set.ranks:
        return
    raise NotImplementedError("hvrun supports only the global process set")


_check_process_set = check_process_set  # the name hvrun.tensorflow's modules use

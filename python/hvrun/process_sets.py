"""Horovod's process sets as hvrun has them: the global set (every rank) only."""
from hvrun import _state


class ProcessSet:
    """Horovod's process sets; hvrun has the global one only (every rank)."""

    def __init__(self, ranks=None):
        self.ranks = ranks
        self.process_set_id = 0

    def size(self):
        return _state.worker().size

    def rank(self):
        return _state.worker().rank

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = ProcessSet()


def add_process_set(process_set):
    raise NotImplementedError("hvrun supports only the global process set")


def remove_process_set(process_set):
    raise NotImplementedError("hvrun supports only the global process set")


def _check_process_set(process_set):
    if process_set is not None and process_set is not global_process_set and process_set.ranks is not None:
        raise NotImplementedError("hvrun supports only the global process set")

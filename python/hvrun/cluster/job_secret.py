"""The job secret a driver makes for the ranks it does not start itself.

The coordinator refuses every call that does not carry it. It must reach each rank without
passing through anything a cluster engine records: task arguments (the engine serializes them,
shows them in its UI and logs them on failures), command lines (``ps``) and logs. So the value is
kept out of ``repr``/``str`` (an object printed by mistake shows ``<hidden>``) and out of pickles
(a secret captured by a task's closure fails loudly at serialization instead of travelling in
the task). Each engine hands it over by a channel of its own and the rank puts it only in the
environment of the process that runs the trainer (``rank_process.run_rank``).
"""
import secrets


class JobSecret:
    """256 random bits, as hvrun's launcher makes (hex, 64 characters)."""

    __slots__ = ("_value",)

    def __init__(self, value=None):
        self._value = value if value is not None else secrets.token_hex(32)
        if not self._value or "\n" in self._value:
            raise ValueError("a job secret is one non-empty line")

    def reveal(self):
        """The value, for the one place that hands it on (a pipe, a child's environment)."""
        return self._value

    def __repr__(self):
        return "JobSecret(<hidden>)"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError(
            "hvrun's job secret cannot be pickled: it would travel in a task's arguments, which "
            "cluster engines log; hand it over through the engine's own channel instead "
            "(hvrun/cluster/__init__.py says how)")

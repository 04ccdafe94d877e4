"""What the torch and TensorFlow elastic suites both check of their framework's `run` (the
neutral loop of hvrun/elastic.py under each binding's reset): a State that records its calls,
and the contract outside an elastic job."""
import pytest

import hvrun.elastic
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class RecordingState(hvrun.elastic.State):
    def __init__(self):
        super().__init__(any_rank=lambda flag: flag)
        self.calls = []

    def save(self):
        self.calls.append("save")

    def restore(self):
        self.calls.append("restore")

    def sync(self):
        self.calls.append("sync")


def check_run_outside_elastic_job(run, monkeypatch, more_errors=()):
    """Outside an elastic job `run` syncs, calls the function once (its arguments, result, name
    and docstring kept) and lets every error through unchanged: no restore, no second call."""
    monkeypatch.delenv("HVRUN_ELASTIC", raising=False)
    assert not hvrun.elastic.is_elastic()
    state = RecordingState()
    called = []

    @run
    def train(state, a, b=0):
        """docstring kept"""
        called.append((a, b))
        return a + b

    assert train(state, 2, b=3) == 5
    assert called == [(2, 3)] and state.calls == ["sync"]
    assert train.__name__ == "train" and train.__doc__ == "docstring kept"

    errors = (HorovodInternalError("peer lost"), HostsUpdatedInterrupt(False)) + tuple(more_errors)
    for error in errors:
        state = RecordingState()
        count = []

        @run
        def failing(state):
            count.append(1)
            raise error

        with pytest.raises(type(error)) as raised:
            failing(state)
        assert raised.value is error  # the error itself, not a translation
        assert count == [1] and state.calls == ["sync"]

    monkeypatch.setenv("HVRUN_ELASTIC", "0")
    state = RecordingState()

    @run
    def lost_peer(state):
        raise HorovodInternalError("peer lost")

    with pytest.raises(HorovodInternalError):
        lost_peer(state)
    assert state.calls == ["sync"]

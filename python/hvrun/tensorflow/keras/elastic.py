"""Horovod's elastic Keras API (horovod.tensorflow.keras.elastic) for Keras 3 on hvrun.

    import hvrun.tensorflow.keras as hvd         # or hvrun.keras
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=10)]

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            done = state.batch                    # batches of this epoch before a reset
            model.fit(data_of(state.epoch, skip=done), steps_per_epoch=steps - done,
                      initial_epoch=state.epoch, epochs=state.epoch + 1, callbacks=callbacks)

    train(state)

The update callbacks must come before CommitStateCallback in the list: Keras calls callbacks
in order, and the commit at the end of an epoch is to save the epoch they just counted.
"""
import keras

from hvrun.elastic import State, is_elastic  # noqa: F401
from hvrun.tensorflow.elastic import ObjectState, TensorFlowKerasState, run  # noqa: F401


class KerasState(TensorFlowKerasState):
    """Horovod's KerasState: hvrun.tensorflow.elastic.TensorFlowKerasState for a Keras model
    (`optimizer` defaults to the compiled model's) and plain attributes (epoch=0, batch=0)."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=keras.backend, **kwargs)


def _steps_per_epoch(callback):
    params = callback.params or {}
    return params.get("steps")


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` batches of model.fit, and at the end of every
    epoch. A commit copies the state and is where every rank learns whether hosts were added
    (HostsUpdatedInterrupt then leaves fit on every rank at the same batch).

    The count starts again with each fit and each epoch, the same on every rank. On an epoch's
    last batch the epoch's end commits instead: a commit between them would save an epoch with
    every batch done and not yet counted."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        if int(batches_per_commit) < 1:
            raise ValueError("batches_per_commit must be at least 1 (got %r)"
                             % (batches_per_commit,))
        self.state = state
        self.batches_per_commit = int(batches_per_commit)
        self.batches_remaining = self.batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining > 0:
            return
        self.batches_remaining = self.batches_per_commit
        steps = _steps_per_epoch(self)
        if steps and batch + 1 >= steps:
            return
        self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self.batches_remaining = self.batches_per_commit
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps state.batch at the number of batches of the current epoch done: after each batch,
    what state.batch was when the epoch began plus the batches since; 0 at the end of an epoch.

    A trainer that resumes an interrupted epoch with the batches it has left (steps_per_epoch
    = steps - state.batch) so keeps counting the epoch's batches across the reset."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self._done_before = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._done_before = int(self.state.batch)

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = self._done_before + batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps state.epoch at the number of epochs done: at the end of each epoch of a fit, what
    state.epoch was when the fit began plus the fit's epochs done. Works with
    fit(initial_epoch=state.epoch, epochs=E) and with fit(epochs=E - state.epoch) alike."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self._offset = None

    def on_train_begin(self, logs=None):
        self._offset = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._offset is None:  # the fit's first epoch: Keras numbers it initial_epoch
            self._offset = int(self.state.epoch) - epoch

    def on_epoch_end(self, epoch, logs=None):
        offset = self._offset if self._offset is not None else int(self.state.epoch) - epoch
        self.state.epoch = epoch + 1 + offset


__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "run", "State", "ObjectState", "TensorFlowKerasState",
           "is_elastic"]

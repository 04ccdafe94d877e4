"""Horovod's Keras callbacks (horovod.tensorflow.keras.callbacks) for Keras 3."""
import keras
import numpy as np
import tensorflow as tf

from hvrun.basics import rank, size
from hvrun.tensorflow.collectives import allreduce
from hvrun.tensorflow.functions import broadcast_variables
from hvrun.tensorflow.gradients import variable_key


def _optimizer_variables(optimizer):
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """After the first batch (when the optimizer has made its variables), every rank takes
    root_rank's model and optimizer variables: training starts from the same state."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        """This variable (Keras 3 or tf.Variable) is not broadcast."""
        self._local_vars.add(variable_key(var))

    def _shared(self, variables):
        return [v for v in variables if variable_key(v) not in self._local_vars]

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        with tf.device(self.device):
            broadcast_variables(self._shared(self.model.variables), root_rank=self.root_rank)
            if self.model.optimizer is not None:
                broadcast_variables(_optimizer_variables(self.model.optimizer),
                                    root_rank=self.root_rank)
        self.broadcast_done = True

    on_train_batch_end = on_batch_end


class MetricAverageCallback(keras.callbacks.Callback):
    """At the end of every epoch, replaces each metric in the logs by its average over every
    rank. Put it before the callbacks that read metrics (checkpoints, early stopping)."""

    def __init__(self, device=""):
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        with tf.device(self.device):
            for metric in sorted(logs):
                value = logs[metric]
                if isinstance(value, (int, float, np.floating, np.integer)) or tf.is_tensor(value):
                    averaged = allreduce(tf.constant(float(value), tf.float64),
                                         name="MetricAverageCallback_" + metric)
                    logs[metric] = float(averaged.numpy())


def _read(value):
    return float(keras.ops.convert_to_numpy(value))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) between start_epoch and
    end_epoch (staircase: at each epoch's first batch; else every batch, with fractional
    epochs). `multiplier` is a number (then multiplier ** (epoch - start_epoch)) or a function.

    momentum_correction is accepted for Horovod's signature; Keras 3 optimizers keep momentum
    as a constant of the compiled step, so it is not adjusted."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        raise ValueError("Could not autodetect the number of steps per epoch. Please specify the "
                         "steps_per_epoch parameter to the %s()." % type(self).__name__)

    def _set_learning_rate(self, epoch):
        self.model.optimizer.learning_rate.assign(self.initial_lr * self.multiplier(epoch))

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (
                self.end_epoch is not None and self.current_epoch >= self.end_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._set_learning_rate(self.current_epoch)
        else:
            self._set_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _read(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Horovod's gradual warm-up: from initial_lr / size to initial_lr over warmup_epochs
    (Goyal et al., "Accurate, Large Minibatch SGD"); initial_lr is the scaled rate."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch
            return 1.0 / size() * (epoch * (size() - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." %
                  (epoch + 1, _read(self.model.optimizer.learning_rate)))


__all__ = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
           "LearningRateScheduleCallback", "LearningRateWarmupCallback"]

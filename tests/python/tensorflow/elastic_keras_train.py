"""An elastic Keras trainer for test_tensorflow_elastic_job.py, written as Horovod's elastic
Keras users write theirs: a small model compiled with hvrun's DistributedOptimizer, a
KerasState, the state callbacks (counting batches and epochs, committing every COMMIT_EVERY
batches) and hvd.elastic.run around model.fit. An epoch interrupted by a reset is resumed with
the batches it has left.

Every process starts from weights of its own (seeded by the rank it was launched as): only the
sync of run() makes them agree. Each rank trains on its share of a fixed dataset per epoch
(rows rank, rank + size, ...), so the shares follow the membership.

Output: "TRAINED epoch E done B size S" after every batch (B: the epoch's batches done),
"RESET rank R size S" after every reset, and at the end "FINAL rank R size S epoch E
iterations I weights W optimizer O" (W, O: SHA-256 of the model's weights and of the
optimizer's variables), on every rank; rank 0 then prints "WEIGHTS <json>", the model's
weights, which the test compares with a replay of the steps that counted.

ELASTIC_KILL="ID:EPOCH:DONE" makes the process launched as rank ID (HVRUN_RANK at launch, which
a reset does not change) SIGKILL itself before the batch that follows DONE batches of epoch
EPOCH; the other ranks are then in that batch's allreduce.
"""
import hashlib
import json
import os
import signal
import sys

import keras
import numpy as np

import hvrun.tensorflow.keras as hvd

FEATURES, BATCH, STEPS, EPOCHS, COMMIT_EVERY = 4, 4, 6, 3, 2
LR, MOMENTUM = 0.05, 0.9
MAX_RANKS = 3  # the dataset has STEPS batches for each of up to this many ranks
LAUNCH_ID = int(os.environ.get("HVRUN_RANK", "-1"))


def epoch_data(epoch):
    rng = np.random.default_rng(1000 + epoch)
    x = rng.normal(size=(MAX_RANKS * STEPS * BATCH, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)[:, None] * 0.2 + 0.5).astype(np.float32)
    return x, y


def share(epoch, rank, size, done):
    """This rank's batches of `epoch` after the first `done`."""
    x, y = epoch_data(epoch)
    rows = np.arange(rank, len(x), size)[:STEPS * BATCH][done * BATCH:]
    return x[rows], y[rows]


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1)])


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def main():
    hvd.init()
    model = make_model(LAUNCH_ID + 1)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM)),
                  loss="mse")
    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    state.register_reset_callbacks(
        [lambda: print("RESET rank %d size %d" % (hvd.rank(), hvd.size()), flush=True)])
    kill = os.environ.get("ELASTIC_KILL", "")
    kill = [int(v) for v in kill.split(":")] if kill else None

    class Progress(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if kill and kill[0] == LAUNCH_ID and (state.epoch, state.batch) == tuple(kill[1:]):
                print("KILLING myself (launched as rank %d) at epoch %d batch %d"
                      % (LAUNCH_ID, state.epoch, state.batch), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

        def on_train_batch_end(self, batch, logs=None):
            print("TRAINED epoch %d done %d size %d" % (state.epoch, state.batch, hvd.size()),
                  flush=True)

    # The update callbacks first: the commit at an epoch's end saves the epoch they counted.
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state), Progress(),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=COMMIT_EVERY)]

    @hvd.elastic.run
    def train(state):
        while state.epoch < EPOCHS:
            done = state.batch
            x, y = share(state.epoch, hvd.rank(), hvd.size(), done)
            model.fit(x, y, batch_size=BATCH, initial_epoch=state.epoch, epochs=state.epoch + 1,
                      steps_per_epoch=STEPS - done, shuffle=False, verbose=0, callbacks=callbacks)

    train(state)
    optimizer = model.optimizer
    print("FINAL rank %d size %d epoch %d iterations %d weights %s optimizer %s"
          % (hvd.rank(), hvd.size(), state.epoch, int(optimizer.iterations.numpy()),
             digest(model.get_weights()), digest(v.numpy() for v in optimizer.variables)),
          flush=True)
    if hvd.rank() == 0:
        print("WEIGHTS " + json.dumps([w.tolist() for w in model.get_weights()]), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())

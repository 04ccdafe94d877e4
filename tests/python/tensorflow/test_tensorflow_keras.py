"""hvrun.tensorflow.keras with Keras 3: model.fit on every rank with the callbacks ends with the
same weights on every rank, and with the weights and loss curve of one process training on the
global batch (float tolerance), in float32 and under mixed_float16 and mixed_bfloat16 policies
(bfloat16 keeps 8 bits of mantissa: the tolerance is that coarse)."""
import os
import shutil
import tempfile

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
hvd = pytest.importorskip("hvrun.tensorflow.keras")
import hvrun.tensorflow as hvd_tf  # noqa: E402  (barrier)

BATCH = 4       # per rank
BATCHES = 6     # per rank and epoch
EPOCHS = 3
FEATURES = 5


def dataset(n_ranks):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(n_ranks * BATCH * BATCHES, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)[:, None] * 0.3 + 1.0).astype(np.float32)
    return x, y


def shard(x, rank, n):
    """Rank r's rows: the r-th part of every global batch of n * BATCH rows."""
    rows = np.arange(len(x)).reshape(BATCHES, n, BATCH)[:, rank, :].reshape(-1)
    return x[rows]


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1)])


def gathered(weights):
    """Every rank's copy of `weights`, to compare."""
    return [hvd.allgather(tf.reshape(tf.cast(w, tf.float32), [1, -1])).numpy() for w in weights]


def train(policy, optimizer_fn, distributed, seed=1, epochs=EPOCHS, callbacks=(), **options):
    r, n = hvd.rank(), hvd.size()
    keras.mixed_precision.set_global_policy(policy)
    try:
        x, y = dataset(n)
        model = make_model(seed)
        if distributed:
            optimizer = hvd.DistributedOptimizer(optimizer_fn(), **options)
            x, y, batch = shard(x, r, n), shard(y, r, n), BATCH
        else:
            optimizer, batch = optimizer_fn(), n * BATCH
        model.compile(optimizer=optimizer, loss="mse")
        history = model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0,
                            callbacks=list(callbacks))
        return model, history.history
    finally:
        keras.mixed_precision.set_global_policy("float32")


def sgd():
    return keras.optimizers.SGD(0.05)


def sgd_with_small_loss_scale():
    """A scale at which no float16 gradient overflows, in one process or on N ranks (with the
    default 2**15 the shards and the global batch would skip different steps)."""
    return keras.optimizers.LossScaleOptimizer(sgd(), initial_scale=16.0)


@pytest.mark.parametrize("policy,optimizer_fn,tolerance",
                         [("float32", sgd, 1e-5), ("mixed_float16", sgd_with_small_loss_scale, 2e-3),
                          ("mixed_bfloat16", sgd, 5e-2)])
def test_fit_matches_one_process_with_the_global_batch(policy, optimizer_fn, tolerance):
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd.callbacks.MetricAverageCallback()]
    model, history = train(policy, optimizer_fn, True, callbacks=callbacks)
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert isinstance(model.optimizer.inner_optimizer, hvd._DistributedOptimizer)
    for copies in gathered(model.get_weights()):
        np.testing.assert_array_equal(copies, np.broadcast_to(copies[0], copies.shape))
    reference, reference_history = train(policy, optimizer_fn, False)
    for mine, theirs in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(history["loss"], reference_history["loss"], rtol=tolerance)
    assert history["loss"][-1] < history["loss"][0]


def test_mixed_float16_default_loss_scale_keeps_the_ranks_in_step():
    """Under the policy, the default 2**15 scale overflows on some ranks' shards and not on
    others: the ranks agree to skip those steps together (no rank waits for another's
    allreduce), and end with the same weights."""
    model, history = train("mixed_float16", sgd, True, epochs=2)
    assert isinstance(model.optimizer.inner_optimizer, hvd._DistributedOptimizer)
    for copies in gathered(model.get_weights() + [model.optimizer.dynamic_scale]):
        np.testing.assert_array_equal(copies, np.broadcast_to(copies[0], copies.shape))


def test_broadcast_callback_starts_every_rank_from_the_root():
    r = hvd.rank()
    model, _ = train("float32", lambda: keras.optimizers.Adam(0.01), True, seed=100 + r,
                     epochs=1, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    for copies in gathered(model.get_weights() + [v.value for v in model.optimizer.variables]):
        np.testing.assert_allclose(copies, np.broadcast_to(copies[0], copies.shape), rtol=1e-6)


def test_backward_passes_per_step_matches_keras_accumulation():
    model, _ = train("float32", lambda: keras.optimizers.SGD(0.05), True,
                     backward_passes_per_step=2, average_aggregated_gradients=True)
    reference, _ = train("float32", lambda: keras.optimizers.SGD(0.05, gradient_accumulation_steps=2),
                         False)
    for mine, theirs in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_learning_rate_callbacks():
    n = hvd.size()
    warmup = hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=2,
                                                      steps_per_epoch=BATCHES)
    _, history = train("float32", lambda: keras.optimizers.SGD(0.1), True, epochs=3,
                       callbacks=[warmup])
    # End of epoch e: the last batch's fractional epoch e + 1 (until the warm-up is over).
    expected = [0.1 / n * ((e + 1) * (n - 1) / 2 + 1) for e in range(2)] + [0.1]
    np.testing.assert_allclose(history["lr"], expected, rtol=1e-6)
    schedule = hvd.callbacks.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5,
                                                          start_epoch=1)
    _, history = train("float32", lambda: keras.optimizers.SGD(0.1), True, epochs=3,
                       callbacks=[schedule])
    # multiplier ** (epoch - start_epoch) from start_epoch on (Horovod's rule).
    np.testing.assert_allclose(history["lr"], [0.1, 0.1, 0.05], rtol=1e-6)


def test_load_model_wraps_the_restored_optimizer():
    r, n = hvd.rank(), hvd.size()
    model, _ = train("float32", lambda: keras.optimizers.Adam(0.01), True, epochs=1)
    path = hvd.broadcast_object(os.path.join(tempfile.mkdtemp(prefix="hvrun-keras-"), "m.keras"), 0)
    if r == 0:
        model.save(path)
    hvd_tf.barrier()  # every rank waits for the file
    loaded = hvd.load_model(path)
    hvd_tf.barrier()
    if r == 0:
        shutil.rmtree(os.path.dirname(path))
    assert isinstance(loaded.optimizer, hvd._DistributedOptimizer)
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations)
    x, y = dataset(n)
    loaded.fit(shard(x, r, n), shard(y, r, n), batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    for copies in gathered(loaded.get_weights()):
        np.testing.assert_allclose(copies, np.broadcast_to(copies[0], copies.shape), rtol=1e-6)


def test_fit_with_uneven_data_then_join():
    r, n = hvd.rank(), hvd.size()
    keras.utils.set_random_seed(3)
    model = make_model(3)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    x, y = dataset(n)
    rows = BATCH * (2 + r)  # rank r has 2 + r batches: the last rank runs longest
    model.fit(x[:rows], y[:rows], batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    last = int(hvd.join())
    assert last == n - 1
    hvd.broadcast_variables(model.variables, root_rank=last)
    for copies in gathered(model.get_weights()):
        np.testing.assert_array_equal(copies, np.broadcast_to(copies[0], copies.shape))


def test_hvrun_keras_is_the_same_api():
    import hvrun.keras
    assert hvrun.keras.DistributedOptimizer is hvd.DistributedOptimizer
    assert hvrun.keras.callbacks.MetricAverageCallback is hvd.callbacks.MetricAverageCallback

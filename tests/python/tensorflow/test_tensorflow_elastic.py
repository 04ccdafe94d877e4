"""hvrun.tensorflow.elastic and hvrun.tensorflow.keras.elastic, run by every rank of a fixed
hvrun job: TensorFlowKerasState / KerasState / TensorFlowState / ObjectState commit, restore and
sync (exact, on the model's weights, the optimizer's variables and the plain attributes), the
agreement on added hosts, the Keras callbacks through model.fit, the translation of the
collectives' TensorFlow errors, and run() outside an elastic job and with real resets.
Also: steps traced in an elastic job keep what a change of size needs (the allreduce when
alone, the size when they run). The end-to-end elastic job (a rank killed mid-training) is
test_tensorflow_elastic_job.py."""
import os
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
hvd = pytest.importorskip("hvrun.tensorflow")
import hvrun.elastic  # noqa: E402
import hvrun.keras  # noqa: E402
import hvrun.keras.elastic  # noqa: E402
import hvrun.tensorflow.keras as hvd_keras  # noqa: E402
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from elastic_run_checks import check_run_outside_elastic_job  # noqa: E402

FEATURES = 4


def ranks():
    return hvd.rank(), hvd.size()


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(3, activation="tanh"),
                             keras.layers.BatchNormalization(), keras.layers.Dense(1)])


def make_optimizer(kind):
    if kind == "sgd":
        return keras.optimizers.SGD(0.05, momentum=0.9)
    return keras.optimizers.Adam(0.01)


def batch_of(seed, rows=8):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(rows, FEATURES)).astype(np.float32)
    return x, (x.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)


def train_steps(model, optimizer, seed, steps=2):
    """This rank's own steps (no averaging): they move the weights and every optimizer slot."""
    for k in range(steps):
        x, y = batch_of(seed * 10 + k)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))


def optimizer_values(optimizer):
    return [np.array(v.numpy()) for v in optimizer.variables]


def snapshot(model, optimizer):
    return [np.array(w) for w in model.get_weights()], optimizer_values(optimizer)


def assert_same(a, b):
    for part_a, part_b in zip(a, b):
        assert len(part_a) == len(part_b)
        for x, y in zip(part_a, part_b):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)


def assert_differs(a, b):
    assert any(not np.array_equal(x, y) for part_a, part_b in zip(a, b)
               for x, y in zip(part_a, part_b))


def everyone(obj, name):
    return hvd.allgather_object(obj, name="test.tf_elastic." + name)


# ---- layout

def test_module_layout():
    import hvrun.tensorflow.elastic as tf_elastic
    import hvrun.tensorflow.keras.elastic as keras_elastic
    assert hvd.elastic is tf_elastic and hvd_keras.elastic is keras_elastic
    # hvrun.keras.elastic (a module of its own, as hvrun.keras.callbacks is) has the same names.
    assert hvrun.keras.elastic.__all__ == keras_elastic.__all__
    for name in ("run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState"):
        assert hasattr(tf_elastic, name), name
    for name in ("run", "KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
                 "UpdateEpochStateCallback", "ObjectState", "State"):
        assert getattr(hvrun.keras.elastic, name) is getattr(keras_elastic, name), name
    assert keras_elastic.run is tf_elastic.run
    assert issubclass(keras_elastic.KerasState, tf_elastic.TensorFlowKerasState)
    assert issubclass(tf_elastic.TensorFlowKerasState, hvrun.elastic.ObjectState)
    assert issubclass(tf_elastic.ObjectState, hvrun.elastic.State)
    for name in ("CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback"):
        assert issubclass(getattr(keras_elastic, name), keras.callbacks.Callback), name


# ---- TensorFlowKerasState

@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_keras_state_commit_restore_round_trip_is_exact(kind):
    r, _ = ranks()
    model = make_model(r)
    optimizer = make_optimizer(kind)
    train_steps(model, optimizer, 0)
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=3, extra={"seen": [1, 2]})
    state.commit()  # save + the agreement on added hosts (none): must not raise
    committed = snapshot(model, optimizer)
    assert int(optimizer.iterations.numpy()) == 2

    train_steps(model, optimizer, 1)
    state.epoch = 7
    state.extra["seen"].append(3)
    assert_differs(snapshot(model, optimizer), committed)  # weights, slots and iterations moved
    assert int(optimizer.iterations.numpy()) == 4

    state.restore()
    assert_same(snapshot(model, optimizer), committed)
    assert state.epoch == 3 and state.extra == {"seen": [1, 2]}
    # What was saved does not change with the training that follows a restore (restore hands
    # out copies): training, then restoring again, gives the committed values again.
    train_steps(model, optimizer, 2)
    state.extra["seen"].append(4)
    assert_differs(snapshot(model, optimizer), committed)
    state.restore()
    assert_same(snapshot(model, optimizer), committed)
    assert state.extra == {"seen": [1, 2]}
    assert state.model is model and state.optimizer is optimizer


def test_keras_state_saved_copies_share_nothing_with_the_variables():
    model = make_model(0)
    optimizer = make_optimizer("sgd")
    train_steps(model, optimizer, 0)
    state = hvd.elastic.TensorFlowKerasState(model, optimizer)
    saved = [a.copy() for a in state._saved_model_state + state._saved_optimizer_state]
    # Assigning in place (what optimizer steps do) leaves the saved arrays alone.
    for v in model.weights:
        v.assign(v + 1.0)
    for v in optimizer.variables:
        v.assign(v + tf.cast(1, v.dtype))
    for a, b in zip(state._saved_model_state + state._saved_optimizer_state, saved):
        np.testing.assert_array_equal(a, b)


def test_keras_state_builds_an_unbuilt_optimizer_and_restores_its_first_state():
    # A compiled model before its first step: the optimizer has no slots yet. The state builds
    # it, so a restore after training takes the slots and the iteration count back to zero.
    model = make_model(0)
    model.compile(optimizer=make_optimizer("adam"), loss="mse")
    assert not model.optimizer.built
    state = hvrun.keras.elastic.KerasState(model, epoch=0)
    assert state.optimizer is model.optimizer and model.optimizer.built
    initial = snapshot(model, model.optimizer)
    assert len(initial[1]) > 2  # iteration, learning rate and the slots
    x, y = batch_of(0, rows=16)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 4
    assert_differs(snapshot(model, model.optimizer), initial)
    state.restore()
    assert_same(snapshot(model, model.optimizer), initial)
    assert int(model.optimizer.iterations.numpy()) == 0


def test_keras_state_sync_gives_every_rank_rank0s_state():
    r, n = ranks()
    model = make_model(r)  # different on every rank
    optimizer = make_optimizer("adam")
    train_steps(model, optimizer, r, steps=r + 1)  # iterations differ too
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=10 * r + 1, tag="rank%d" % r)
    state.sync()

    # Rank 0's state, rebuilt here: the same seeds give the same values.
    ref_model, ref_optimizer = make_model(0), make_optimizer("adam")
    train_steps(ref_model, ref_optimizer, 0, steps=1)
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_optimizer))
    assert state.epoch == 1 and state.tag == "rank0"
    gathered = everyone(snapshot(model, optimizer), "sync")
    for other in gathered[1:]:
        assert_same(other, gathered[0])

    # sync() saved: a restore right after training gives the synced state.
    train_steps(model, optimizer, 5)
    state.epoch = 99
    state.restore()
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_optimizer))
    assert state.epoch == 1


def test_keras_state_sync_to_a_rank_whose_optimizer_never_stepped():
    # As a rank that just joined: its optimizer has no variables beyond the iteration count
    # and learning rate until the state builds it; then it takes rank 0's.
    r, _ = ranks()
    model = make_model(r)
    optimizer = make_optimizer("sgd")
    if r == 0:
        train_steps(model, optimizer, 0, steps=3)
    assert optimizer.built == (r == 0)
    # (Every rank makes the same Keras objects in the same order: their automatic names, which
    # the collectives of a later model.fit are named after, stay the same on every rank.)
    state = hvd.elastic.TensorFlowKerasState(model=model, optimizer=optimizer)
    state.sync()
    ref_model, ref_optimizer = make_model(0), make_optimizer("sgd")
    train_steps(ref_model, ref_optimizer, 0, steps=3)
    assert_same(snapshot(model, optimizer), snapshot(ref_model, ref_optimizer))
    assert int(optimizer.iterations.numpy()) == 3


def test_keras_state_assignment_replaces_the_held_model():
    model_a, model_b = make_model(0), make_model(1)
    state = hvd.elastic.TensorFlowKerasState(model_a)
    assert state.optimizer is None  # not compiled: only the weights
    state.model = model_b
    state.commit()
    expected = [w.copy() for w in model_b.get_weights()]
    model_b.set_weights([np.zeros_like(w) for w in expected])
    state.restore()
    for got, want in zip(model_b.get_weights(), expected):
        np.testing.assert_array_equal(got, want)


def test_tensorflow_state_of_variables():
    r, _ = ranks()
    variables = [tf.Variable(np.full([2, 3], float(r), np.float32)),
                 tf.Variable(np.arange(4, dtype=np.int64) + r)]
    state = hvd.elastic.TensorFlowState(variables, step=r)
    variables[0].assign_add(tf.ones([2, 3]))
    variables[1].assign(tf.zeros([4], tf.int64))
    state.step = 50
    state.restore()
    np.testing.assert_array_equal(variables[0].numpy(), np.full([2, 3], float(r)))
    np.testing.assert_array_equal(variables[1].numpy(), np.arange(4) + r)
    assert state.step == r
    state.sync()
    np.testing.assert_array_equal(variables[0].numpy(), np.zeros([2, 3]))
    np.testing.assert_array_equal(variables[1].numpy(), np.arange(4))
    assert state.step == 0


# ---- ObjectState and the agreement on added hosts

def test_object_state_commit_restore_sync():
    r, _ = ranks()
    state = hvd.elastic.ObjectState(epoch=r, names=["r%d" % r])
    state.commit()
    state.epoch = 50
    state.names.append("x")
    state.restore()
    assert state.epoch == r and state.names == ["r%d" % r]
    state.names.append("y")  # not committed: sync sends the current values
    state.sync()
    assert state.epoch == 0 and state.names == ["r0", "y"]
    state.epoch = 9
    state.restore()  # sync saved
    assert state.epoch == 0 and state.names == ["r0", "y"]


def test_hosts_update_seen_by_one_rank_interrupts_every_rank(monkeypatch):
    r, n = ranks()
    assert hvrun.elastic.local_hosts_updated() is False
    hvd.elastic.ObjectState(x=1).commit()  # nothing added: no interrupt
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: r == n - 1)
    state = hvd.elastic.ObjectState(x=r)
    state.x = 42
    with pytest.raises(HostsUpdatedInterrupt) as info:
        state.commit()
    assert info.value.skip_sync is False
    state.x = 0
    state.restore()
    assert state.x == 42  # commit saved before it raised
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: False)
    state.commit()


# ---- the Keras callbacks through model.fit

STEPS = 5
BATCH = 4


def keras_fit_setup(seed=3):
    r, n = ranks()
    model = make_model(seed)
    model.compile(optimizer=hvd_keras.DistributedOptimizer(make_optimizer("sgd")), loss="mse")
    rng = np.random.default_rng(11 + r)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
    return model, x, y


def recording(state):
    commits = []
    original = state.commit

    def commit():
        commits.append((state.epoch, state.batch))
        original()

    state.commit = commit
    return commits


def elastic_callbacks(state, batches_per_commit):
    return [hvrun.keras.elastic.UpdateBatchStateCallback(state),
            hvrun.keras.elastic.UpdateEpochStateCallback(state),
            hvrun.keras.elastic.CommitStateCallback(state, batches_per_commit=batches_per_commit)]


def test_keras_callbacks_advance_and_commit_the_state():
    model, x, y = keras_fit_setup()
    state = hvrun.keras.elastic.KerasState(model, epoch=0, batch=0)
    commits = recording(state)
    seen = []
    probe = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append((state.epoch, state.batch)))
    callbacks = elastic_callbacks(state, batches_per_commit=2)
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
              callbacks=callbacks + [probe])
    # The batch count advances after every batch, the epoch count after every epoch.
    assert seen == [(e, b) for e in range(2) for b in range(1, STEPS + 1)]
    # Every second batch, except the last of an epoch, whose end commits the counted epoch.
    assert commits == [(0, 2), (0, 4), (1, 0), (1, 2), (1, 4), (2, 0)]
    assert (state.epoch, state.batch) == (2, 0)

    # The counts go on in the next fit, which starts from the epoch the state says.
    history = model.fit(x, y, batch_size=BATCH, initial_epoch=state.epoch, epochs=3,
                        shuffle=False, verbose=0, callbacks=callbacks)
    assert history.epoch == [2]
    assert commits[6:] == [(2, 2), (2, 4), (3, 0)]
    # What was committed last is what a restore gives.
    committed = snapshot(model, model.optimizer)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    state.epoch, state.batch = 9, 9
    state.restore()
    assert_same(snapshot(model, model.optimizer), committed)
    assert (state.epoch, state.batch) == (3, 0)
    assert int(model.optimizer.iterations.numpy()) == 3 * STEPS
    # The DistributedOptimizer kept the ranks in step (the batch-norm statistics are each
    # rank's own: only the trained weights and the optimizer's state are compared).
    gathered = everyone(([w.numpy() for w in model.trainable_weights],
                         optimizer_values(model.optimizer)), "fit")
    for other in gathered[1:]:
        assert_same(other, gathered[0])


def test_keras_callbacks_resume_an_interrupted_epoch():
    # A fit of the batches an epoch had left after a reset counts on from them; the counted
    # epoch is the absolute one also when the fit numbers its epochs from 0.
    model, x, y = keras_fit_setup()
    state = hvrun.keras.elastic.KerasState(model, epoch=1, batch=3)
    commits = recording(state)
    model.fit(x[3 * BATCH:], y[3 * BATCH:], batch_size=BATCH, epochs=1, steps_per_epoch=2,
              shuffle=False, verbose=0, callbacks=elastic_callbacks(state, 1))
    assert commits == [(1, 4), (2, 0)]
    assert (state.epoch, state.batch) == (2, 0)
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
              callbacks=elastic_callbacks(state, 10))
    assert commits[2:] == [(3, 0), (4, 0)]  # 10 batches never came: only the epochs' ends


def test_hosts_update_leaves_fit_on_every_rank_at_the_same_batch(monkeypatch):
    r, n = ranks()
    model, x, y = keras_fit_setup()
    state = hvrun.keras.elastic.KerasState(model, epoch=0, batch=0)
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated",
                        lambda: r == n - 1 and state.batch >= 3)
    with pytest.raises(HostsUpdatedInterrupt):
        model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                  callbacks=elastic_callbacks(state, 1))
    assert everyone((state.epoch, state.batch), "interrupt") == [(0, 3)] * n
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: False)


def test_commit_state_callback_refuses_a_zero_interval():
    with pytest.raises(ValueError):
        hvrun.keras.elastic.CommitStateCallback(hvd.elastic.ObjectState(), batches_per_commit=0)


# ---- TensorFlow errors of hvrun's collectives

def test_collective_errors_become_horovod_internal_errors():
    eager = tf.errors.UnavailableError(
        None, None, "{{function_node __wrapped__HvrunAllreduce_device_/job:localhost}} the job's "
        "membership changed: rank 2 was killed [Op:HvrunAllreduce] name: grad")
    translated = hvd.elastic.collective_error(eager)
    assert isinstance(translated, HorovodInternalError) and translated.code == "UNAVAILABLE"
    assert "membership changed" in str(translated)
    # In a tf.function TensorFlow reports INTERNAL, naming the code the op returned.
    in_graph = tf.errors.InternalError(
        None, None, "Graph execution error:\n  File \"<string>\", line 101, in hvrun_allreduce\n"
        "\nthe job's membership changed: rank 2 disconnected\n\t [[{{node "
        "DistributedSGD_Allreduce/HorovodAllreduce_grads_0}}]]\nExecuting non-communication op "
        "<x> originally returned UnavailableError, and was replaced by InternalError")
    assert hvd.elastic.collective_error(in_graph).code == "UNAVAILABLE"
    aborted = tf.errors.AbortedError(None, None, "job aborted: rank 1 failed [Op:HvrunBroadcast]")
    assert hvd.elastic.collective_error(aborted).code == "ABORTED"
    # Another op's error, and what is not a TensorFlow error, are not hvrun's.
    other = tf.errors.UnavailableError(None, None, "socket closed [Op:IteratorGetNext]")
    assert hvd.elastic.collective_error(other) is None
    assert hvd.elastic.collective_error(ValueError("x")) is None


def test_real_collective_error_is_recognized():
    r, _ = ranks()
    with pytest.raises(tf.errors.OpError) as raised:
        hvd.allreduce(tf.ones([r + 2]), name="tf_elastic_mismatch")
    translated = hvd.elastic.collective_error(raised.value)
    assert translated is not None and translated.code == "FAILED_PRECONDITION"

    @tf.function
    def in_graph(t):
        return hvd.allreduce(t, name="tf_elastic_mismatch_graph")

    with pytest.raises(tf.errors.OpError) as raised:
        in_graph(tf.ones([r + 2]))
    translated = hvd.elastic.collective_error(raised.value)
    assert translated is not None and translated.code == "FAILED_PRECONDITION"


def test_run_in_elastic_job_raises_an_error_of_the_program_unchanged(monkeypatch):
    # Tensors whose shapes differ between ranks: a reset would meet them again, so run()
    # raises TensorFlow's error instead of resetting.
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    r, _ = ranks()
    state = hvd.elastic.ObjectState(x=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        return hvd.allreduce(tf.ones([r + 2]), name="tf_elastic_run_mismatch")

    with pytest.raises(tf.errors.FailedPreconditionError):
        train(state)
    assert calls == [1] and hvd.size() == ranks()[1]


# ---- run()

def test_run_outside_elastic_job_calls_once_and_propagates(monkeypatch):
    check_run_outside_elastic_job(hvd.elastic.run, monkeypatch)
    # Keras's run too, and a collective's TensorFlow error is not translated outside a job.
    check_run_outside_elastic_job(
        hvrun.keras.elastic.run, monkeypatch,
        [tf.errors.UnavailableError(None, None, "lost [Op:HvrunAllreduce]")])


def test_run_elastic_resets_rejoin_the_job(monkeypatch):
    # Every rank fails at the same point with a collective's TensorFlow error (as a lost peer
    # makes them), then one rank hears that hosts were added: run() must translate the error,
    # restore, really leave and rejoin the job twice, run the callbacks, sync, and keep what
    # was committed.
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    r, n = ranks()
    model = make_model(r)
    optimizer = make_optimizer("sgd")
    train_steps(model, optimizer, r)
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, attempts=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append((hvd.rank(), hvd.size()))])
    updates = {"seen": False}
    monkeypatch.setattr(hvrun.elastic, "local_hosts_updated", lambda: updates["seen"] and r == 0)
    calls, agreed = [], []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        state.attempts += 1
        gathered = everyone(model.get_weights(), "run.%d" % len(calls))
        agreed.append(all(np.array_equal(a, b) for g in gathered for a, b in zip(g, gathered[0])))
        train_steps(model, optimizer, 20 + len(calls))
        if len(calls) == 1:
            state.epoch = 5  # not committed: the restore takes it back
            raise tf.errors.UnavailableError(
                None, None, "the job's membership changed: simulated [Op:HvrunAllreduce]")
        if len(calls) == 2:
            state.epoch = 1
            updates["seen"] = True
            state.commit()  # raises HostsUpdatedInterrupt on every rank
            raise AssertionError("commit did not raise")
        updates["seen"] = False
        state.commit()
        return state.epoch

    assert train(state) == 1
    assert len(calls) == 3 and agreed == [True, True, True]
    assert hvd.is_initialized() and hvd.size() == n and hvd.rank() == r
    assert resets == [(r, n), (r, n)]
    assert state.attempts == 2 and state.epoch == 1  # the first call's increment rolled back
    np.testing.assert_allclose(hvd.allreduce(tf.ones([1]), op=hvd.Sum).numpy(), [n])


# ---- traced steps outlive the membership they were traced in

def graph_op_types(concrete):
    """The op types of a traced function, with those of the functions it calls."""
    types = {op.type for op in concrete.graph.get_operations()}
    for function in concrete.graph._functions.values():
        types.update(node.op for node in function.definition.node_def)
    return types


@pytest.mark.parametrize("elastic", [False, True])
def test_traced_gradient_averaging_keeps_its_allreduce_when_alone_in_an_elastic_job(
        monkeypatch, elastic):
    # A job that is alone when the step is traced may grow later: in an elastic job the traced
    # step must still average (a fixed job of one rank leaves it out).
    import hvrun.tensorflow.gradients as tf_gradients
    if elastic:
        monkeypatch.setenv("HVRUN_ELASTIC", "1")
    else:
        monkeypatch.delenv("HVRUN_ELASTIC", raising=False)
    monkeypatch.setattr(tf_gradients, "process_set_size", lambda process_set: 1)
    allreduce_grads = tf_gradients.make_allreduce_grads_fn(
        "ElasticTrace", "", "", hvd.Compression.none, False, hvd.Average, 1.0, None)
    concrete = allreduce_grads.get_concrete_function([tf.TensorSpec([3], tf.float32)])
    assert ("HvrunAllreduce" in graph_op_types(concrete)) == elastic


def test_traced_sparse_average_divides_by_the_size_when_it_runs(monkeypatch):
    monkeypatch.setenv("HVRUN_ELASTIC", "1")
    r, n = ranks()

    @tf.function
    def average(values):
        return hvd.allreduce(tf.IndexedSlices(values, tf.constant([r]), tf.constant([n, 2])),
                             op=hvd.Average, name="tf_elastic_sparse")

    values = tf.fill([1, 2], float(r + 1))
    concrete = average.get_concrete_function(values)
    assert "HvrunSize" in graph_op_types(concrete)
    result = average(values)
    dense = tf.math.unsorted_segment_sum(result.values, result.indices, n).numpy()
    np.testing.assert_allclose(dense, [[(k + 1) / n] * 2 for k in range(n)])

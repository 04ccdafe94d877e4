"""hvrun.tensorflow in Horovod 0.28.1's corners: the error class of every mismatched or refused
collective (FailedPreconditionError, as Horovod's ops raise), in-place broadcast that assigns
the variables in graphs (resource and reference variables, v1 sessions and tf.function), and the
Keras 3 pieces: PartialDistributedOptimizer, BroadcastGlobalVariablesCallback(local_variables=),
local sources and variables that are Keras 3 variables."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
hvd = pytest.importorskip("hvrun.tensorflow")
hvd_keras = pytest.importorskip("hvrun.tensorflow.keras")

MODES = ["eager", "function"]


def ranks():
    return hvd.rank(), hvd.size()


def run(mode, fn):
    return fn() if mode == "eager" else tf.function(fn)()


def in_step():
    _, n = ranks()
    np.testing.assert_allclose(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), [n, n])


# ---- error classes: one mapping (docs/tensorflow.md, "Errors")

def _mismatches():
    r, n = ranks()
    other = tf.float32 if r == 0 else tf.float64
    return {
        "allreduce_shape": lambda: hvd.allreduce(tf.ones([r + 2]), name="fp_allreduce_shape"),
        "allreduce_dtype": lambda: hvd.allreduce(tf.ones([2], other), name="fp_allreduce_dtype"),
        "allgather_dtype": lambda: hvd.allgather(tf.ones([2], other), name="fp_allgather_dtype"),
        "allgather_shape": lambda: hvd.allgather(tf.ones([2, r + 1]), name="fp_allgather_shape"),
        "broadcast_root": lambda: hvd.broadcast(tf.ones([2]), r, name="fp_broadcast_root"),
        "broadcast_bad_root": lambda: hvd.broadcast(tf.ones([2]), n + 1, name="fp_bad_root"),
        "alltoall_dtype": lambda: hvd.alltoall(tf.ones([n], other), name="fp_alltoall_dtype"),
        "alltoall_splits": lambda: hvd.alltoall(tf.ones([n]), splits=[n + 1] + [0] * (n - 1),
                                                name="fp_alltoall_splits"),
        "reducescatter_shape": lambda: hvd.reducescatter(tf.ones([n, r + 1]), op=hvd.Sum,
                                                         name="fp_reducescatter_shape"),
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", [
    "allreduce_shape", "allreduce_dtype", "allgather_dtype", "allgather_shape", "broadcast_root",
    "broadcast_bad_root", "alltoall_dtype", "alltoall_splits", "reducescatter_shape"])
def test_mismatched_or_refused_collectives_raise_failed_precondition(case, mode):
    with pytest.raises(tf.errors.FailedPreconditionError) as raised:
        run(mode, _mismatches()[case])
    assert case.split("_")[0] in str(raised.value)  # the library's message, naming the op
    in_step()


# ---- broadcast_: assigns the variables, in every mode

def test_broadcast_inplace_eager_and_tf_function():
    r, _ = ranks()
    v = tf.Variable([float(r)] * 3)
    np.testing.assert_array_equal(hvd.broadcast_([v], 0)[0].numpy(), [0.0] * 3)
    np.testing.assert_array_equal(v.numpy(), [0.0] * 3)
    w = tf.Variable([float(r) + 1] * 2)

    @tf.function
    def step():
        hvd.broadcast_([w], 0, name="inplace_fn")  # nothing returned: it must still assign
        return tf.constant(0)

    step()
    np.testing.assert_array_equal(w.numpy(), [1.0] * 2)


@pytest.mark.parametrize("use_resource", [False, True], ids=["reference", "resource"])
def test_broadcast_inplace_in_a_v1_graph_assigns(use_resource):
    r, _ = ranks()
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(r) + 5] * 4, use_resource=use_resource)
        values = hvd.broadcast_([v], 0, name="inplace_graph_%s" % use_resource)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_array_equal(session.run(values)[0], [5.0] * 4)
            np.testing.assert_array_equal(session.run(v), [5.0] * 4)
    in_step()


# ---- Keras 3: local variables

def _model(seed):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(3,))
    shared = keras.layers.Dense(2, name="shared")(inputs)
    outputs = keras.layers.Dense(1, name="local")(shared)
    return keras.Model(inputs, outputs)


def test_partial_distributed_optimizer_keeps_local_layers_own():
    r, n = ranks()
    model = _model(0)  # the same start on every rank
    local = model.get_layer("local")
    opt = hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=[local])
    before = {w.path: w.numpy() for w in model.trainable_weights}
    x = np.full((4, 3), r + 1.0, np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x))
    grads = tape.gradient(loss, model.trainable_weights)
    opt.apply_gradients(zip(grads, model.trainable_weights))
    deltas = {w.path: w.numpy() - before[w.path] for w in model.trainable_weights}
    everyone = {path: hvd.allgather(tf.constant(d[None])).numpy() for path, d in deltas.items()}
    for path, gathered in everyone.items():
        same = all(np.allclose(gathered[0], g) for g in gathered)
        if path.startswith("local"):
            if path.endswith("kernel"):
                assert not same, path  # each rank's own gradient (the inputs differ)
            own = grads[[w.path for w in model.trainable_weights].index(path)].numpy()
            np.testing.assert_allclose(deltas[path], -0.1 * own / n, rtol=1e-5)  # scaled 1/size
        else:
            assert same, path
    with pytest.raises(ValueError):
        hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=["x"])


def test_broadcast_callback_local_variables_and_register_local_var():
    r, _ = ranks()
    model = _model(r)  # a different start on every rank
    local = model.get_layer("local").kernel
    mine = local.numpy()
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.0)), loss="mse")
    callback = hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=[local])
    also = model.get_layer("local").bias
    callback.register_local_var(also)  # a Keras 3 variable: no ref()
    own_bias = also.numpy()
    model.fit(np.ones((2, 3), np.float32), np.ones((2, 1), np.float32), batch_size=2, epochs=1,
              verbose=0, callbacks=[callback])
    np.testing.assert_array_equal(local.numpy(), mine)
    np.testing.assert_array_equal(also.numpy(), own_bias)
    kernel = model.get_layer("shared").kernel.numpy()
    root = hvd.broadcast(tf.constant(kernel), 0).numpy()
    np.testing.assert_array_equal(kernel, root)


def test_gradient_tape_register_local_source_takes_keras_variables():
    r, n = ranks()
    shared = keras.Variable(np.ones(2, np.float32))
    local = keras.Variable(np.ones(2, np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(shared * (r + 1.0)) + tf.reduce_sum(local * (r + 1.0))
    tape = hvd.DistributedGradientTape(tape)
    tape.register_local_source(local)
    g_shared, g_local = tape.gradient(loss, [shared, local])
    np.testing.assert_allclose(g_shared.numpy(), [(n + 1) / 2] * 2)
    np.testing.assert_allclose(g_local.numpy(), [(r + 1.0) / n] * 2)  # scale_local_gradients
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(local * (r + 1.0))
    tape = hvd.DistributedGradientTape(tape, scale_local_gradients=False)
    tape.register_local_source(local)
    np.testing.assert_allclose(tape.gradient(loss, local).numpy(), [r + 1.0] * 2)

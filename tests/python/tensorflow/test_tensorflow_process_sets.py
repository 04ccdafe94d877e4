"""hvrun.tensorflow's process sets against references, on 3 and 4 ranks: every collective on
disjoint and on overlapping sets, eagerly and in tf.function, the gradients of the
differentiable ops on a set, DistributedGradientTape and the Keras DistributedOptimizer
averaging over a set, the variable and object helpers, static sets from init(), and Horovod's
errors."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
hvd = pytest.importorskip("hvrun.tensorflow")

MODES = ["eager", "function"]


def ranks():
    return hvd.rank(), hvd.size()


def run(mode, fn, *args):
    """fn(*args) eagerly, or traced into a tf.function (the set id becomes an op attribute)."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn)(*args)


@pytest.fixture
def halves():
    """(this rank's half, the other half): the first ceil(n/2) ranks and the rest, contiguous
    sets (hvrun.torch's suite splits even and odd ranks); removed after the test."""
    r, n = ranks()
    cut = (n + 1) // 2
    low = hvd.add_process_set(list(range(cut)))
    high = hvd.add_process_set(hvd.ProcessSet(list(range(cut, n))))
    yield (low, high) if r < cut else (high, low)
    hvd.barrier()
    assert hvd.remove_process_set(low) and hvd.remove_process_set(high)


@pytest.mark.parametrize("mode", MODES)
def test_every_collective_on_disjoint_sets(halves, mode):
    r, n = ranks()
    ps, _ = halves
    members, k, me = ps.ranks, ps.size(), ps.rank()

    def collectives():
        x = tf.fill([4], float(r + 1))
        summed = hvd.allreduce(x, op=hvd.Sum, process_set=ps)
        averaged = hvd.allreduce(x, process_set=ps)
        grouped = hvd.grouped_allreduce([tf.ones([2]), tf.ones([5])], op=hvd.Sum, process_set=ps)
        gathered = hvd.allgather(tf.fill([me + 1, 2], float(r)), process_set=ps)
        grouped_gathered = hvd.grouped_allgather([tf.fill([1], r), tf.fill([2], r)],
                                                 process_set=ps)
        broadcast = hvd.broadcast(tf.fill([3], float(r)), members[-1], process_set=ps)
        sent = tf.constant([[float(r * 100 + j)] for j in range(k)])
        even_split = hvd.alltoall(sent, process_set=ps)
        uneven, received = hvd.alltoall(tf.ones([k * (k + 1) // 2]) * r,
                                        splits=list(range(1, k + 1)), process_set=ps)
        scattered = hvd.reducescatter(tf.ones([2 * k, 3]), op=hvd.Sum, process_set=ps)
        scattered_avg = hvd.reducescatter(tf.fill([2 * k], float(r)), process_set=ps)
        grouped_scattered = hvd.grouped_reducescatter([tf.ones([k]), tf.ones([2 * k, 2])],
                                                      op=hvd.Sum, process_set=ps)
        hvd.barrier(process_set=ps)
        everyone = hvd.allreduce(tf.ones([1]), op=hvd.Sum)
        return (summed, averaged, grouped, gathered, grouped_gathered, broadcast, even_split,
                uneven, received, scattered, scattered_avg, grouped_scattered, everyone)

    (summed, averaged, grouped, gathered, grouped_gathered, broadcast, even_split, uneven,
     received, scattered, scattered_avg, grouped_scattered, everyone) = run(mode, collectives)
    total = float(sum(m + 1 for m in members))
    np.testing.assert_array_equal(summed.numpy(), np.full(4, total))
    np.testing.assert_allclose(averaged.numpy(), np.full(4, total / k))  # the set's size
    np.testing.assert_array_equal(grouped[1].numpy(), np.full(5, float(k)))
    want = np.concatenate([np.full((i + 1, 2), float(m)) for i, m in enumerate(members)])
    np.testing.assert_array_equal(gathered.numpy(), want)
    np.testing.assert_array_equal(grouped_gathered[0].numpy(), np.array(members))
    np.testing.assert_array_equal(grouped_gathered[1].numpy(), np.repeat(members, 2))
    np.testing.assert_array_equal(broadcast.numpy(), np.full(3, float(members[-1])))
    np.testing.assert_array_equal(even_split.numpy(),
                                  np.array([[float(m * 100 + me)] for m in members]))
    np.testing.assert_array_equal(received.numpy(), np.full(k, me + 1))
    np.testing.assert_array_equal(uneven.numpy(), np.repeat(members, me + 1).astype(np.float32))
    np.testing.assert_array_equal(scattered.numpy(), np.full((2, 3), float(k)))
    np.testing.assert_allclose(scattered_avg.numpy(), np.full(2, np.mean(members)))
    np.testing.assert_array_equal(grouped_scattered[0].numpy(), np.full(1, float(k)))
    np.testing.assert_array_equal(grouped_scattered[1].numpy(), np.full((2, 2), float(k)))
    np.testing.assert_array_equal(everyone.numpy(), [float(n)])  # the global set holds every rank


def test_size_and_included_ops_read_the_set(halves):
    _, n = ranks()
    ps, other = halves
    assert int(hvd.size_op(process_set_id=ps.process_set_id)) == ps.size()
    assert int(hvd.size_op(process_set_id=other.process_set_id)) == other.size()
    assert int(hvd.size_op()) == n
    assert int(hvd.process_set_included_op(process_set_id=ps.process_set_id)) == 1
    assert int(hvd.process_set_included_op(process_set_id=other.process_set_id)) == 0
    with pytest.raises(tf.errors.NotFoundError, match="no process set 999"):
        hvd.size_op(process_set_id=999)


@pytest.mark.parametrize("mode", MODES)
def test_overlapping_sets_run_concurrently(mode):
    r, n = ranks()
    low = hvd.add_process_set(list(range(n - 1)))
    high = hvd.add_process_set(list(range(1, n)))
    mine_ = [ps for ps in (low, high) if ps.included()]
    if mode == "function" and r % 2:
        # One graph submits both at once, so ranks in both sets may list them in opposite
        # orders (eagerly each call waits for its result: opposite orders would wait forever).
        mine_.reverse()

    def step(x):
        return [hvd.allreduce(x, op=hvd.Sum, name="overlap%d" % ps.process_set_id, process_set=ps)
                for ps in mine_]

    for _ in range(3):
        got = run(mode, step, tf.fill([8], float(r)))
        for ps, t in zip(mine_, got):
            np.testing.assert_array_equal(t.numpy(), np.full(8, float(sum(ps.ranks))))
    hvd.barrier()
    assert hvd.remove_process_set(low) and hvd.remove_process_set(high)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_run_on_the_ops_set(halves, mode):
    ps, _ = halves
    k = ps.size()

    def grads():
        x = tf.fill([3], float(hvd.rank()))
        z = tf.ones([2])
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, z])
            y = tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum, process_set=ps))
            g = tf.reduce_sum(hvd.allgather(tf.expand_dims(z, 0) * float(ps.rank() + 1),
                                            process_set=ps))
        return tape.gradient(y, x), tape.gradient(g, z)

    dx, dz = run(mode, grads)
    np.testing.assert_array_equal(dx.numpy(), np.full(3, float(k)))  # Sum's gradient, over the set
    # The allgather's gradient is averaged over the set's k ranks and keeps this rank's row.
    np.testing.assert_allclose(dz.numpy(), np.full(2, float(ps.rank() + 1)))


def test_distributed_gradient_tape_averages_over_the_set(halves):
    ps, _ = halves
    w = tf.Variable([1.0, 1.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * float(hvd.rank() + 1))
    tape = hvd.DistributedGradientTape(tape, process_set=ps)
    (grad,) = tape.gradient(loss, [w])
    np.testing.assert_allclose(grad.numpy(), np.full(2, np.mean([m + 1.0 for m in ps.ranks])))


def test_keras_distributed_optimizer_averages_over_the_set(halves):
    import hvrun.tensorflow.keras as hvd_keras
    keras = pytest.importorskip("keras")
    ps, _ = halves
    w = tf.Variable([0.0, 0.0])
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), process_set=ps)
    opt.apply_gradients([(tf.fill([2], float(hvd.rank() + 1)), w)])
    np.testing.assert_allclose(w.numpy(), np.full(2, -np.mean([m + 1.0 for m in ps.ranks])))


def test_variables_and_objects_on_a_set(halves):
    r, _ = ranks()
    ps, _ = halves
    root = ps.ranks[0]
    v = tf.Variable([float(r)] * 3)
    hvd.broadcast_variables([v], root, process_set=ps)
    np.testing.assert_array_equal(v.numpy(), np.full(3, float(root)))
    assert hvd.broadcast_object({"from": r}, root_rank=root, process_set=ps) == {"from": root}
    assert hvd.allgather_object(("rank", r), process_set=ps) == [("rank", m) for m in ps.ranks]
    v.assign([float(r)] * 3)
    hvd.broadcast_([v], ps.ranks[-1], process_set=ps)
    np.testing.assert_array_equal(v.numpy(), np.full(3, float(ps.ranks[-1])))


def test_static_sets_from_init_get_ids_in_order():
    r, n = ranks()
    hvd.shutdown()
    first, second = hvd.ProcessSet([0, 1]), hvd.ProcessSet(list(range(1, n)))
    hvd.init(process_sets=[first, [0, n - 1]])
    assert first.process_set_id == 1 and first.size() == 2
    assert first.rank() == (r if r < 2 else -1) and first.included() == (r < 2)
    if r < 2:
        got = tf.function(lambda: hvd.allreduce(tf.ones([3]), op=hvd.Sum, process_set=first))()
        np.testing.assert_array_equal(got.numpy(), np.full(3, 2.0))
    hvd.shutdown()
    assert first.process_set_id is None  # a new job: the sets are gone
    with pytest.raises(ValueError, match="takes a list of ProcessSet"):
        hvd.init(process_sets="static")
    hvd.init(process_sets="dynamic")
    assert second.process_set_id is None
    assert hvd.add_process_set(second).process_set_id == 1
    hvd.barrier()
    assert hvd.remove_process_set(second)


def test_errors_as_horovod_raises_them():
    r, n = ranks()
    pair = hvd.add_process_set([0, 1])
    if r >= 2:
        for call in (lambda: hvd.allreduce(tf.ones([1]), process_set=pair),
                     lambda: hvd.allgather(tf.ones([1]), process_set=pair),
                     lambda: hvd.barrier(process_set=pair),
                     tf.function(lambda: hvd.broadcast(tf.ones([1]), 0, process_set=pair))):
            # Horovod's class (InvalidArgumentError); a ValueError too, as hvrun.torch's.
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="rank %d is not in process set" % r) as raised:
                call()
            assert isinstance(raised.value, ValueError)
    else:
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="root rank 2 is not in process set"):
            hvd.broadcast(tf.ones([1]), 2, process_set=pair)
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="splits must be 2 non-negative row counts"):
            hvd.alltoall(tf.ones([3]), splits=[1, 1, 1], process_set=pair)
    hvd.barrier()
    assert hvd.remove_process_set(pair)
    with pytest.raises(ValueError, match="has not been added"):
        hvd.allreduce(tf.ones([1]), process_set=pair)
    with pytest.raises(ValueError, match="has not been added"):
        hvd.reducescatter(tf.ones([2]), process_set=hvd.ProcessSet([0, 1]))


@pytest.mark.parametrize("api", ["tape", "keras"])
def test_distributed_optimizer_outside_its_set_keeps_its_own_gradients(api):
    # Horovod's rule: a rank outside the optimizer's set reduces nothing and applies its own
    # gradient; the members average among themselves, waiting for no one else.
    import keras
    import hvrun.tensorflow.keras as hvd_keras
    r, n = ranks()
    pair = hvd.add_process_set([0, 1])
    w = tf.Variable(tf.zeros([3])) if api == "tape" else keras.Variable(np.zeros(3, np.float32))
    if api == "keras":
        opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), process_set=pair)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * (r + 1.0))
        if api == "tape":
            grad = hvd.DistributedGradientTape(tape, process_set=pair).gradient(loss, w)
            w.assign_sub(grad)
        else:
            opt.apply_gradients([(tape.gradient(loss, w), w)])
    expected = -2 * (1.5 if r < 2 else r + 1.0)
    np.testing.assert_allclose(np.asarray(w.numpy()), [expected] * 3)
    hvd.barrier()
    assert hvd.remove_process_set(pair)

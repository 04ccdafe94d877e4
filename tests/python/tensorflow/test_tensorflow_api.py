"""hvrun.tensorflow against references: every collective of Horovod's TensorFlow API, its
dtypes and shapes, eagerly and in tf.function, the gradients Horovod defines, fused submissions,
mismatches raising on every rank, join with uneven batches, init -> shutdown -> init."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
hvd = pytest.importorskip("hvrun.tensorflow")

REDUCED = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32, tf.float64]
MOVED = REDUCED + [tf.bool, tf.int16, tf.uint16]
MODES = ["eager", "function"]


def ranks():
    return hvd.rank(), hvd.size()


def values(rank, shape, dtype, seed=0):
    """Rank `rank`'s tensor: small integers, exact in every dtype (bool: their parity)."""
    rng = np.random.default_rng(1000 * seed + rank)
    ints = rng.integers(1, 5, size=shape)
    if dtype == tf.bool:
        return tf.constant(ints % 2 == 0)
    return tf.cast(tf.constant(ints), dtype)


def run(mode, fn, *args):
    """fn(*args) eagerly, or traced into a tf.function (the kernels then run in a graph)."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn)(*args)


def as_float(t):
    return tf.cast(t, tf.float64).numpy()


def test_topology_and_constants():
    r, n = ranks()
    assert hvd.is_initialized()
    assert (hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()) == (r, n, 0, 1)
    assert (int(hvd.rank_op()), int(hvd.size_op()), int(hvd.local_rank_op()),
            int(hvd.local_size_op()), int(hvd.process_set_included_op())) == (r, n, r, n, 1)
    assert int(tf.function(hvd.size_op)()) == n
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    assert hvd.gloo_built() and not hvd.mpi_enabled()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", REDUCED, ids=lambda d: d.name)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Min, hvd.Max, hvd.Product])
def test_allreduce_ops_dtypes(mode, dtype, op):
    r, n = ranks()
    inputs = [values(i, (2, 3), dtype, seed=op) for i in range(n)]
    stacked = np.stack([as_float(t) for t in inputs])
    reference = {hvd.Sum: np.sum, hvd.Min: np.min, hvd.Max: np.max, hvd.Product: np.prod}[op](stacked, 0)
    out = run(mode, lambda x: hvd.allreduce(x, op=op), inputs[r])
    assert out.dtype == dtype and out.shape == (2, 3)
    np.testing.assert_array_equal(as_float(out), reference)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 0), (3, 4, 5)], ids=str)
def test_allreduce_average_shapes_and_scale_factors(mode, shape):
    r, n = ranks()
    x = tf.fill(shape, float(r + 1))
    average = run(mode, hvd.allreduce, x)  # op=None: Average, as Horovod
    np.testing.assert_allclose(average.numpy(), np.full(shape, (n + 1) / 2))
    scaled = run(mode, lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0,
                                               postscale_factor=0.5 / n), x)
    np.testing.assert_allclose(scaled.numpy(), np.full(shape, (n + 1) / 2))
    old = hvd.allreduce(x, average=False)
    np.testing.assert_allclose(old.numpy(), np.full(shape, n * (n + 1) / 2))
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)


def test_allreduce_refuses_adasum_and_unsupported_dtypes():
    with pytest.raises(NotImplementedError):
        hvd.allreduce(tf.ones([2]), op=hvd.Adasum)
    with pytest.raises((TypeError, tf.errors.OpError)):
        hvd.allreduce(tf.constant([True, False]))
    with pytest.raises((TypeError, tf.errors.OpError)):
        hvd.allreduce(tf.constant([1 + 2j]))


@pytest.mark.parametrize("mode", MODES)
def test_compression_fp16(mode):
    r, n = ranks()
    x = tf.fill([4], float(r + 1))
    out = run(mode, lambda t: hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16), x)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), np.full(4, n * (n + 1) / 2))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_of_many_tensors_fuses_and_matches(mode):
    r, n = ranks()
    tensors = [values(r, (i % 5 + 1, 3), tf.float32, seed=i) for i in range(60)]
    out = run(mode, lambda ts: hvd.grouped_allreduce(ts, op=hvd.Sum), tensors)
    assert len(out) == 60
    for i, t in enumerate(out):
        reference = sum(as_float(values(k, (i % 5 + 1, 3), tf.float32, seed=i)) for k in range(n))
        np.testing.assert_array_equal(as_float(t), reference)
    mixed = hvd.grouped_allreduce([tf.ones([2], tf.float32), tf.ones([3], tf.int32)], op=hvd.Sum)
    assert mixed[0].dtype == tf.float32 and mixed[1].dtype == tf.int32
    np.testing.assert_array_equal(mixed[1].numpy(), [n, n, n])


def test_many_concurrent_allreduces_in_one_graph():
    r, n = ranks()

    @tf.function
    def step(ts):
        return [hvd.allreduce(t, op=hvd.Sum) for t in ts]

    tensors = [tf.fill([i + 1], float(r + i)) for i in range(40)]
    for _ in range(3):  # cached after the first negotiation
        out = step(tensors)
        for i, t in enumerate(out):
            np.testing.assert_allclose(t.numpy(), np.full(i + 1, sum(k + i for k in range(n))))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", MOVED, ids=lambda d: d.name)
def test_allgather_dtypes_uneven_rows(mode, dtype):
    r, n = ranks()
    mine = values(r, (r + 1, 2), dtype)
    out = run(mode, hvd.allgather, mine)
    assert out.dtype == dtype and out.shape == (n * (n + 1) // 2, 2)
    reference = np.concatenate([values(k, (k + 1, 2), dtype).numpy() for k in range(n)])
    np.testing.assert_array_equal(out.numpy(), reference)


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allgather(mode):
    r, n = ranks()
    out = run(mode, hvd.grouped_allgather, [tf.fill([r + 1], r), tf.fill([1, 2], r * 10)])
    np.testing.assert_array_equal(out[0].numpy(), np.concatenate([[k] * (k + 1) for k in range(n)]))
    np.testing.assert_array_equal(out[1].numpy(), [[k * 10, k * 10] for k in range(n)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", MOVED, ids=lambda d: d.name)
def test_broadcast_dtypes_and_roots(mode, dtype):
    r, n = ranks()
    for root in range(n):
        out = run(mode, lambda t: hvd.broadcast(t, root), values(r, (3, 2), dtype))
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), values(root, (3, 2), dtype).numpy())


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_with_and_without_splits(mode):
    r, n = ranks()
    even = tf.constant([[r * 100 + k] for k in range(n)], tf.int32)
    out = run(mode, hvd.alltoall, even)
    np.testing.assert_array_equal(out.numpy(), [[k * 100 + r] for k in range(n)])
    # rank r sends k + 1 rows to rank k, each row holding (sender, receiver)
    splits = [k + 1 for k in range(n)]
    rows = [[r, k] for k in range(n) for _ in range(k + 1)]
    out, received = run(mode, lambda t, s: hvd.alltoall(t, splits=s),
                        tf.constant(rows, tf.float32), tf.constant(splits, tf.int32))
    np.testing.assert_array_equal(received.numpy(), [r + 1] * n)
    np.testing.assert_array_equal(out.numpy(), [[k, r] for k in range(n) for _ in range(r + 1)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows", [None, 7])
def test_reducescatter_and_grouped(mode, rows):
    r, n = ranks()
    rows = rows or 2 * n
    x = tf.reshape(tf.range(rows * 2, dtype=tf.float32), [rows, 2]) * (r + 1)
    total = np.arange(rows * 2, dtype=np.float64).reshape(rows, 2) * n * (n + 1) / 2
    share = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    start = sum(share[:r])
    out = run(mode, lambda t: hvd.reducescatter(t, op=hvd.Sum), x)
    np.testing.assert_allclose(out.numpy(), total[start:start + share[r]])
    averaged = run(mode, hvd.reducescatter, x)  # Average by default
    np.testing.assert_allclose(averaged.numpy(), total[start:start + share[r]] / n)
    grouped = run(mode, lambda a, b: hvd.grouped_reducescatter([a, b], op=hvd.Sum), x, x * 2)
    np.testing.assert_allclose(grouped[1].numpy(), 2 * total[start:start + share[r]])


def test_gradients_of_the_differentiable_ops():
    r, n = ranks()
    x = tf.Variable(tf.fill([2 * n, 2], float(r + 1)))
    with tf.GradientTape(persistent=True) as tape:
        summed = hvd.allreduce(x, op=hvd.Sum)
        gathered = hvd.allgather(x)
        broadcast = hvd.broadcast(x, 0)
        exchanged = hvd.alltoall(x)
        scattered = hvd.reducescatter(x, op=hvd.Sum)
        losses = [tf.reduce_sum(t * (r + 1.0)) for t in
                  (summed, gathered, broadcast, exchanged, scattered)]
    grads = [tape.gradient(loss, x).numpy() for loss in losses]
    mean_weight = (n + 1) / 2
    # allreduce Sum: the gradient is allreduced with Sum.
    np.testing.assert_allclose(grads[0], np.full([2 * n, 2], n * mean_weight))
    # allgather: the averaged gradient's own rows.
    np.testing.assert_allclose(grads[1], np.full([2 * n, 2], mean_weight))
    # broadcast: the averaged gradient on the root, zero elsewhere.
    np.testing.assert_allclose(grads[2], np.full([2 * n, 2], mean_weight if r == 0 else 0.0))
    # alltoall: the rows go back to where they came from, carrying the receiver's weight.
    expected = np.repeat(np.arange(1, n + 1, dtype=np.float64), 2)[:, None] * np.ones([1, 2])
    np.testing.assert_allclose(grads[3], expected)
    # reducescatter Sum: every rank's share gathered, times size.
    weights = np.repeat(np.arange(1, n + 1, dtype=np.float64), 2)[:, None] * np.ones([1, 2])
    np.testing.assert_allclose(grads[4], weights * n)


def test_gradient_in_tf_function():
    r, n = ranks()
    x = tf.Variable([float(r + 1)] * 3)

    @tf.function
    def grad():
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(hvd.allreduce(x * x, op=hvd.Average))
        return tape.gradient(y, x)

    # The output gradient (ones) is averaged back through the allreduce, then times 2x.
    np.testing.assert_allclose(grad().numpy(), np.full(3, 2.0 * (r + 1)))


def test_indexed_slices_allgathered_or_dense():
    r, n = ranks()
    table = tf.Variable(tf.zeros([4, 2]))
    with tf.GradientTape() as tape:
        rows = tf.gather(table, [r % 4])
        loss = tf.reduce_sum(rows) * (r + 1)
    grad = tape.gradient(loss, table)
    assert isinstance(grad, tf.IndexedSlices)
    reduced = hvd.allreduce(grad, op=hvd.Sum)
    assert isinstance(reduced, tf.IndexedSlices)
    dense = tf.convert_to_tensor(reduced).numpy()
    expected = np.zeros([4, 2])
    for k in range(n):
        expected[k % 4] += k + 1
    np.testing.assert_allclose(dense, expected)
    averaged = tf.convert_to_tensor(hvd.allreduce(grad)).numpy()
    np.testing.assert_allclose(averaged, expected / n)


@pytest.mark.parametrize("mode", MODES)
def test_distributed_gradient_tape(mode):
    r, n = ranks()
    w = tf.Variable([1.0, 2.0])
    emb = tf.Variable(tf.zeros([3, 2]))

    def grads(options):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * float(r + 1)) + tf.reduce_sum(tf.gather(emb, [r % 3])) * (r + 1)
        tape = hvd.DistributedGradientTape(tape, **options)
        return tape.gradient(loss, [w, emb])

    mean = (n + 1) / 2
    emb_sum = np.zeros([3, 2])
    for k in range(n):
        emb_sum[k % 3] += k + 1
    for options, scale in [({}, 1.0), ({"op": hvd.Sum}, n),
                           ({"compression": hvd.Compression.fp16}, 1.0),
                           ({"gradient_predivide_factor": 2.0, "sparse_as_dense": True}, 1.0),
                           ({"sparse_as_dense": True, "groups": 1}, 1.0)]:
        g_w, g_emb = grads(options) if mode == "eager" else tf.function(lambda: grads(options))()
        np.testing.assert_allclose(g_w.numpy(), np.full(2, mean * scale), rtol=1e-3)
        assert g_w.dtype == tf.float32
        if options.get("sparse_as_dense"):
            assert not isinstance(g_emb, tf.IndexedSlices)
        np.testing.assert_allclose(tf.convert_to_tensor(g_emb).numpy(), emb_sum / n * scale,
                                   rtol=1e-3)


def test_distributed_gradient_tape_single_source_and_local_source():
    r, n = ranks()
    w = tf.Variable(1.0)
    b = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        loss = w * (r + 1) + b * (r + 1)
    tape = hvd.DistributedGradientTape(tape)
    tape.register_local_source(b)
    g_w, g_b = tape.gradient(loss, [w, b])
    assert float(g_w) == pytest.approx((n + 1) / 2)
    # Local: not reduced, divided by the size (scale_local_gradients, Horovod's default).
    assert float(g_b) == pytest.approx((r + 1) / n)
    with tf.GradientTape() as tape:
        loss = w * (r + 1)
    assert float(hvd.DistributedGradientTape(tape).gradient(loss, w)) == pytest.approx((n + 1) / 2)


def test_legacy_distributed_optimizer_keeps_ranks_equal():
    r, n = ranks()
    w = tf.Variable([0.0, 0.0])
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5))
    assert type(opt).__name__ == "_DistributedOptimizer"
    for _ in range(3):
        opt.minimize(lambda: tf.reduce_sum(w * float(r + 1)), var_list=[w])
    np.testing.assert_allclose(w.numpy(), np.full(2, -3 * 0.5 * (n + 1) / 2))
    everyone = hvd.allgather(tf.reshape(w, [1, 2])).numpy()
    assert (everyone == everyone[0]).all()
    with pytest.raises(NotImplementedError):
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5),
                                 backward_passes_per_step=2)


def test_distributed_optimizer_hands_keras_optimizers_to_the_keras_wrapper():
    # As Horovod's: hvrun.tensorflow.DistributedOptimizer wraps a Keras optimizer the Keras way.
    import keras
    from hvrun.tensorflow import keras_optimizer
    r, n = ranks()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.5))
    assert isinstance(opt, keras_optimizer._DistributedOptimizer)
    assert isinstance(opt, keras.optimizers.SGD)
    w = keras.Variable([0.0, 0.0])
    opt.apply_gradients([(tf.fill([2], float(r + 1)), w)])
    np.testing.assert_allclose(w.numpy(), np.full(2, -0.5 * (n + 1) / 2))


def test_broadcast_variables_objects_and_allgather_object():
    r, n = ranks()
    variables = [tf.Variable(tf.fill([i + 1], float(r))) for i in range(20)]
    hvd.broadcast_variables(variables, root_rank=n - 1)
    for i, v in enumerate(variables):
        np.testing.assert_array_equal(v.numpy(), np.full(i + 1, n - 1.0))
    v = tf.Variable([float(r)] * 2)
    np.testing.assert_array_equal(hvd.broadcast_([v], 0)[0].numpy(), [0.0, 0.0])
    assert hvd.broadcast_object({"rank": r, "list": list(range(r + 3))}, root_rank=1) == \
        {"rank": 1, "list": [0, 1, 2, 3]}
    assert hvd.broadcast_object_fn(root_rank=0)(r * 7) == 0
    assert hvd.allgather_object(("r", r)) == [("r", k) for k in range(n)]
    # One allgather per object: sizes that differ per rank, None, a large one.
    assert hvd.allgather_object(b"y" * (r * 70000) if r else None, name="obj.mixed") == \
        [b"y" * (k * 70000) if k else None for k in range(n)]
    assert hvd.broadcast_object(b"z" * (200000 + r), root_rank=n - 1, name="obj.big") == \
        b"z" * (200000 + n - 1)


@pytest.mark.parametrize("mode", MODES)
def test_mismatched_shapes_raise_on_every_rank(mode):
    r, n = ranks()
    x = tf.ones([r + 2])
    with pytest.raises(tf.errors.OpError) as raised:
        run(mode, lambda t: hvd.allreduce(t, name="mismatch_%s" % mode), x)
    message = str(raised.value)
    assert "rank 0" in message and "rank 1" in message, message
    # The job goes on: the next collective works.
    np.testing.assert_allclose(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), [n, n])


def test_mismatched_dtypes_raise():
    r, n = ranks()
    x = tf.ones([2], tf.float32 if r == 0 else tf.float64)
    with pytest.raises(tf.errors.OpError) as raised:
        hvd.allreduce(x, name="dtype_mismatch")
    assert "rank" in str(raised.value)


def test_join_with_uneven_batches():
    r, n = ranks()
    # rank r has r + 1 batches; the others go on while the ranks that ran out have joined.
    for step in range(n):
        if step > r:
            break
        out = hvd.allreduce(tf.fill([3], 1.0), op=hvd.Sum, name="batch")
        contributing = sum(1 for k in range(n) if step <= k)
        np.testing.assert_allclose(out.numpy(), np.full(3, float(contributing)))
    last = hvd.join()
    assert int(last) == n - 1
    hvd.barrier()


def test_join_in_tf_function_and_barrier():
    r, n = ranks()
    assert int(tf.function(hvd.join)()) in range(n)
    @tf.function
    def wait_for_everyone():
        hvd.barrier()  # stateful: runs although nothing reads it
        return tf.constant(1)

    assert int(wait_for_everyone()) == 1


def test_shutdown_then_ops_fail_and_init_again_works():
    r, n = ranks()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
        hvd.allreduce(tf.ones([2]))
    with pytest.raises(ValueError):
        hvd.rank()
    hvd.init()
    assert hvd.is_initialized() and hvd.rank() == r
    np.testing.assert_allclose(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), [n, n])

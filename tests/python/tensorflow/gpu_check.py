"""hvrun.tensorflow on GPU tensors: every rank of `hvrun -np N python gpu_check.py` (one GPU per
rank; scripts/gpu-check runs it) checks the collectives of GPU tensors eagerly and in a
tf.function against the values every rank can compute, that each ran in hvrun's GPU kernel
(its output lives on the GPU: had TensorFlow fallen back to the CPU kernel, the output would be
on the CPU), and one Keras model.fit step that leaves every rank with the same weights. Prints
'tensorflow gpu check: N checks passed on rank R' and exits 0, or raises.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvrun.tensorflow as hvd  # noqa: E402

hvd.init()
# --device cpu checks this script itself where there is no GPU (the same checks on the CPU kernels).
DEVICE = "/CPU:0" if sys.argv[1:] == ["--device", "cpu"] else "/GPU:0"
gpu_name = "none"
if DEVICE == "/GPU:0":
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        sys.exit("tensorflow gpu check: TensorFlow sees no GPU (a CPU-only TensorFlow, or no driver)")
    gpu = gpus[hvd.local_rank() % len(gpus)]
    gpu_name = gpu.name
    tf.config.set_visible_devices(gpu, "GPU")
    # NCCL's buffers and the library's fusion buffer are allocated outside TensorFlow's allocator.
    tf.config.experimental.set_memory_growth(gpu, True)

rank, size = hvd.rank(), hvd.size()
checks = 0


def on_device(tensor, what):
    """The output of `what` lives on the GPU: hvrun's GPU kernel made it."""
    global checks
    assert tensor.device.endswith(DEVICE.lstrip("/")), \
        "%s ran on %s, not in the %s kernel" % (what, tensor.device, DEVICE)
    checks += 1


def equal(got, want, what, tolerance=0.0):
    global checks
    got = np.asarray(got)
    assert got.shape == np.shape(want), "%s: shape %s, expected %s" % (what, got.shape, np.shape(want))
    assert np.allclose(got.astype(np.float64), np.asarray(want, dtype=np.float64), atol=tolerance), \
        "%s: %s, expected %s" % (what, got, want)
    checks += 1


def expected():
    """(what, value every rank must get, tolerance) of each output of collectives(), in order."""
    triangle = size * (size + 1) / 2
    return [
        ("allreduce sum", np.full([1000], triangle), 0.0),
        ("allreduce average float16", np.full([1000], (size + 1) / 2), 1e-2),
        ("grouped allreduce [0]", np.full([1000], triangle), 0.0),
        ("grouped allreduce [1]", np.full([1000], 2 * triangle), 0.0),
        # Uneven first dimensions: rank r has r + 1 rows of value r.
        ("allgather", np.concatenate([np.full([r + 1, 3], float(r)) for r in range(size)]), 0.0),
        ("broadcast", np.full([4, 4], 7.0), 0.0),
        # Row r of every rank goes to rank r.
        ("alltoall", [[10.0 * r + rank] for r in range(size)], 0.0),
        ("reducescatter", np.full([2, 5], triangle), 0.0),
    ]


def collectives(tag):
    """Every collective on GPU tensors, the outputs in expected()'s order, and the alltoall's
    received splits (host memory)."""
    with tf.device(DEVICE):
        x = tf.fill([1000], float(rank + 1))
        grouped = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="grouped_" + tag)
        received, splits = hvd.alltoall(tf.constant([[10.0 * rank + r] for r in range(size)]),
                                        splits=[1] * size, name="a2a_" + tag)
        outputs = [
            hvd.allreduce(x, op=hvd.Sum, name="sum_" + tag),
            hvd.allreduce(tf.cast(x, tf.float16), op=hvd.Average, name="avg16_" + tag),
            grouped[0],
            grouped[1],
            hvd.allgather(tf.fill([rank + 1, 3], float(rank)), name="gather_" + tag),
            hvd.broadcast(tf.fill([4, 4], float(rank + 7)), root_rank=0, name="bcast_" + tag),
            received,
            hvd.reducescatter(tf.fill([2 * size, 5], float(rank + 1)), op=hvd.Sum,
                              name="scatter_" + tag),
        ]
    return outputs, splits


def check(outputs, splits, how):
    for (what, want, tolerance), got in zip(expected(), outputs):
        on_device(got, "%s (%s)" % (what, how))
        equal(got.numpy(), want, "%s (%s)" % (what, how), tolerance)
    equal(splits.numpy(), [1] * size, "alltoall received splits (%s)" % how)


check(*collectives("eager"), "eager")
# In a tf.function: one graph, whose collectives are submitted together and fuse.
check(*tf.function(lambda: collectives("graph"))(), "tf.function")

# int32 stays in host memory on a GPU device: the GPU kernel reduces it through the CPU path.
with tf.device(DEVICE):
    count = hvd.allreduce(tf.constant([1, 2], dtype=tf.int32), op=hvd.Sum, name="int32")
equal(count.numpy(), [size, 2 * size], "allreduce int32 (host memory on the GPU device)")

# One Keras model.fit step: the gradients are GPU tensors reduced by hvrun's GPU kernel.
import keras  # noqa: E402

import hvrun.tensorflow.keras as hvd_keras  # noqa: E402

keras.utils.set_random_seed(rank)  # different initial weights: the callback makes them equal
model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.01 * size)),
              loss="mse")
rng = np.random.default_rng(rank)
features = rng.normal(size=(64, 8)).astype(np.float32)
targets = rng.normal(size=(64, 1)).astype(np.float32)
history = model.fit(features, targets, batch_size=16, epochs=1, verbose=0,
                    callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
loss = history.history["loss"][-1]
assert np.isfinite(loss), "model.fit's loss is %s" % loss
for i, weight in enumerate(model.get_weights()):
    with tf.device(DEVICE):
        every = hvd.allgather(tf.constant(weight[np.newaxis]), name="weights_%d" % i)
    on_device(every, "allgather of weight %d" % i)
    every = every.numpy()
    equal(every, np.repeat(every[:1], size, axis=0), "model.fit weight %d equal on every rank" % i)

hvd.shutdown()
print("tensorflow gpu check: %d checks passed on rank %d of %d (%s, GPU %s, loss %.4f)"
      % (checks, rank, size, DEVICE, gpu_name, loss), flush=True)

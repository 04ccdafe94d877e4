#!/usr/bin/env python3
"""The TensorFlow dual-GPU guide's Horovod recipe, for TensorFlow 2 and Keras 3:

    hvrun -np 2 python3 examples/tensorflow_guide.py
    hvrun -np 2 python3 examples/tensorflow_guide.py --mixed-precision --checkpoint-every 50

  1. hvd.init(); pin one GPU per process by local rank, with memory growth;
  2. scale the learning rate by hvd.size() and wrap the optimizer in hvd.DistributedOptimizer;
  3. start every rank from rank 0's variables (broadcast after the first step, when the
     optimizer has made its own);
  4. train on uneven shards (rank r has a few more batches than rank r - 1): hvd.join() lets the
     ranks that ran out wait while the others finish, then everyone takes the last rank's model;
  5. rank 0 writes a checkpoint every N steps (--checkpoint-every), and a last one.

Synthetic regression data; no download. Every hvd.* call is Horovod's (horovod.tensorflow).
Horovod itself stops at Keras 2, whose loss-scale optimizer spells scale_loss as
get_scaled_loss: that one line (with --mixed-precision) is Keras 3's, not Horovod's.
"""
import argparse
import os
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvrun.tensorflow as hvd  # noqa: E402

parser = argparse.ArgumentParser(description="The guide's Horovod recipe on TensorFlow 2",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
parser.add_argument("--batches", type=int, default=60, help="batches of rank 0 (rank r: + 3r)")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate (scaled by size)")
parser.add_argument("--mixed-precision", action="store_true", help="mixed_float16 policy")
parser.add_argument("--checkpoint-every", type=int, default=1000, help="steps between checkpoints")
parser.add_argument("--checkpoint-dir", default=None, help="where rank 0 writes checkpoints")
args = parser.parse_args()

hvd.init()

# Pin GPU to be used to process local rank (one GPU per process), with memory growth.
gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

if args.mixed_precision:
    keras.mixed_precision.set_global_policy("mixed_float16")

# Each rank its own shard; uneven on purpose.
rng = np.random.default_rng(hvd.rank())
steps_here = args.batches + 3 * hvd.rank()
x = rng.normal(size=(steps_here * args.batch_size, 16)).astype(np.float32)
y = (x @ np.linspace(-1.0, 1.0, 16, dtype=np.float32)[:, None] + 0.5).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch_size)

model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1, dtype="float32")])
# Horovod: scale the learning rate by the number of workers; average gradients over them.
opt = hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9))
loss_fn = keras.losses.MeanSquaredError()
scaled = isinstance(opt, keras.optimizers.LossScaleOptimizer)  # under mixed_float16


@tf.function
def train_step(features, targets):
    with tf.GradientTape() as tape:
        loss = loss_fn(targets, model(features, training=True))
        scaled_loss = opt.scale_loss(loss) if scaled else loss
    grads = tape.gradient(scaled_loss, model.trainable_variables)
    # Averaged over the ranks that still have data.
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


checkpoint_dir = args.checkpoint_dir
if hvd.rank() == 0 and checkpoint_dir is None:
    checkpoint_dir = tempfile.mkdtemp(prefix="hvrun-tf-guide-")
checkpoint = tf.train.Checkpoint(model=model, optimizer=opt)

losses = []
for step, (features, targets) in enumerate(dataset):
    losses.append(float(train_step(features, targets)))
    if step == 0:
        # Horovod: start from rank 0's model and optimizer state.
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables, root_rank=0)
    if hvd.rank() == 0 and (step + 1) % args.checkpoint_every == 0:
        print("step %d: loss %.4f, checkpoint %s" %
              (step + 1, losses[-1], checkpoint.save(os.path.join(checkpoint_dir, "ckpt"))),
              flush=True)

# Horovod: this rank has no more data; the others go on without it until every rank joined.
last = int(hvd.join())
hvd.broadcast_variables(model.variables, root_rank=last)
if hvd.rank() == 0:
    saved = checkpoint.save(os.path.join(checkpoint_dir, "ckpt"))
    print("rank 0: %d steps, loss %.4f -> %.4f; last rank to join: %d; final checkpoint %s" %
          (len(losses), losses[0], losses[-1], last, saved), flush=True)
everyone = hvd.allgather(tf.reshape(model.trainable_variables[0], [1, -1])).numpy()
assert (everyone == everyone[0]).all(), "ranks hold different models after join"
print("rank %d done: same model on all %d ranks" % (hvd.rank(), hvd.size()), flush=True)

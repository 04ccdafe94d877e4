#!/usr/bin/env python3
"""Keras model.fit on every rank, Horovod style, on synthetic MNIST-shaped data (no download);
then a synthetic benchmark that reports img/sec per rank and in total.

    hvrun -np 2 python3 examples/tensorflow_keras_mnist.py
    hvrun -np 2 python3 examples/tensorflow_keras_mnist.py --epochs 1 --no-benchmark

The images are 28 x 28 x 1 and their labels come from a fixed random "teacher" network, so the
task is learnable and the accuracy rises. Every rank trains on its own shard; the optimizer
averages the gradients, the callbacks start every rank from rank 0's weights, average the
metrics and warm the learning rate up; only rank 0 writes checkpoints and prints.

Written against Horovod's API (horovod.tensorflow.keras): replacing the import below with
`import horovod.tensorflow.keras as hvd` needs no other change (Horovod itself runs on Keras 2).
"""
import argparse
import os
import tempfile
import timeit

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvrun.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser(description="Keras MNIST-style training on synthetic data",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=3, help="training epochs")
parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
parser.add_argument("--train-samples", type=int, default=1024, help="training samples per rank")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate (scaled by size)")
parser.add_argument("--warmup-epochs", type=int, default=1, help="learning-rate warm-up epochs")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression")
parser.add_argument("--checkpoint-dir", default=None, help="rank 0 saves a checkpoint per epoch")
parser.add_argument("--no-benchmark", action="store_true", help="skip the benchmark")
parser.add_argument("--num-warmup-batches", type=int, default=2, help="benchmark warm-up batches")
parser.add_argument("--num-batches-per-iter", type=int, default=5, help="batches per iteration")
parser.add_argument("--num-iters", type=int, default=3, help="benchmark iterations")
args = parser.parse_args()

hvd.init()
# One GPU per process, by local rank (a CPU machine has none).
gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

keras.utils.set_random_seed(1234)
teacher = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                            keras.layers.Dense(10)])
rng = np.random.default_rng(hvd.rank())  # every rank its own shard
x_train = rng.normal(size=(args.train_samples, 28, 28, 1)).astype(np.float32)
y_train = np.argmax(teacher.predict(x_train, verbose=0), axis=1)

keras.utils.set_random_seed(hvd.rank())  # different initial weights: the callback fixes that
model = keras.Sequential([
    keras.Input((28, 28, 1)),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(10),
])
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
scaled_lr = args.lr * hvd.size()
opt = hvd.DistributedOptimizer(keras.optimizers.SGD(scaled_lr, momentum=0.9),
                               compression=compression)
model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])

callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs,
                                             verbose=1),
]
if hvd.rank() == 0:
    directory = args.checkpoint_dir or tempfile.mkdtemp(prefix="hvrun-keras-mnist-")
    callbacks.append(keras.callbacks.ModelCheckpoint(os.path.join(directory, "epoch-{epoch}.keras")))

history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                    callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)
if hvd.rank() == 0:
    print("Final: loss %.4f accuracy %.4f (averaged over %d ranks)" %
          (history.history["loss"][-1], history.history["accuracy"][-1], hvd.size()), flush=True)

if not args.no_benchmark:
    data = tf.random.uniform([args.batch_size, 28, 28, 1])
    target = tf.random.uniform([args.batch_size], maxval=10, dtype=tf.int64)
    step = model.make_train_function()
    batches = tf.data.Dataset.from_tensors((data, target)).repeat()
    iterator = iter(batches)

    def benchmark_step():
        step(iterator)

    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        seconds = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / seconds)
    mean = float(np.mean(rates))
    total = float(hvd.allreduce(tf.constant(mean), op=hvd.Sum).numpy())
    print("Img/sec per rank %d: %.1f +-%.1f" % (hvd.rank(), mean, 1.96 * np.std(rates)), flush=True)
    if hvd.rank() == 0:
        print("Total img/sec on %d rank(s): %.1f" % (hvd.size(), total), flush=True)

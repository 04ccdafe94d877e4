#!/usr/bin/env python3
"""Keras training throughput (a custom training loop), in one run on this machine: 1 rank through hvrun, 2 ranks through
hvrun, and 2 workers of TensorFlow's own MultiWorkerMirroredStrategy (ring collectives over
gRPC on loopback), the same model, per-rank batch and steps; img/s per rank and in total, and
scaling efficiency (total img/s on 2 / (2 x img/s on 1)).

    bench/frameworks/keras_throughput.py [--steps 30] [--warmup 5] [--batch-size 64] [--tiny]
                                         [--json] [--build-dir build] [--python PATH]

Needs the project's Python environment with TensorFlow (HVRUN_VENV, else <source>/.venv) and a
build with hvrun.tensorflow (--build-dir, default <source>/build). Each row is its own job.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 600


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=64, help="images per rank and step")
    parser.add_argument("--image-size", type=int, default=32, help="images are S x S x 3")
    parser.add_argument("--tiny", action="store_true", help="a few small steps (CI smoke test)")
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--python", default=None,
                        help="the interpreter with TensorFlow (default: $HVRUN_VENV/bin/python, "
                             "else <source>/.venv/bin/python)")
    parser.add_argument("--role", choices=["hvrun", "mwms"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workers", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tiny:
        args.steps, args.warmup, args.batch_size, args.image_size = 4, 1, 8, 16
    return args


# ---- the worker side: one process of a row

def model_and_data(keras, tf, args, global_batch):
    model = keras.Sequential([
        keras.Input((args.image_size, args.image_size, 3)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])
    images = tf.random.uniform([global_batch, args.image_size, args.image_size, 3])
    labels = tf.random.uniform([global_batch], maxval=10, dtype=tf.int64)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    return model, data


def timed_steps(step, iterator, args):
    for _ in range(args.warmup):
        step(next(iterator))
    start = time.perf_counter()
    for _ in range(args.steps):
        step(next(iterator))
    return args.batch_size * args.steps / (time.perf_counter() - start)


def run_worker(args):
    """The same training step in both: a Keras model and optimizer in a tf.function custom
    loop (Keras 3's model.fit does not take a MultiWorkerMirroredStrategy's dataset)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.role == "hvrun":
        import hvrun.tensorflow.keras as hvd
        hvd.init()
        model, data = model_and_data(keras, tf, args, args.batch_size)
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))

        @tf.function
        def step(batch):
            images, labels = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))  # averaged over ranks

        rate, rank = timed_steps(step, iter(data), args), hvd.rank()
    else:
        workers = args.workers.split(",")
        os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                              "task": {"type": "worker", "index": args.worker_index}})
        ring = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
        with strategy.scope():
            model, data = model_and_data(keras, tf, args, args.batch_size * len(workers))
            opt = keras.optimizers.SGD(0.01)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        batches = iter(strategy.experimental_distribute_dataset(data.with_options(options)))

        @tf.function
        def step(batch):
            def replica_step(images, labels):
                with tf.GradientTape() as tape:
                    loss = loss_fn(labels, model(images, training=True)) / strategy.num_replicas_in_sync
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))  # summed over workers
            strategy.run(replica_step, args=batch)

        rate, rank = timed_steps(step, batches, args), args.worker_index
    print("RATE %d %.3f" % (rank, rate), flush=True)


# ---- the driver: every row, one table

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rates_of(output):
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"RATE (\d+) ([0-9.]+)", output)}


def worker_command(python, args, *extra):
    return [python, os.path.abspath(__file__), "--steps", str(args.steps), "--warmup",
            str(args.warmup), "--batch-size", str(args.batch_size), "--image-size",
            str(args.image_size)] + list(extra)


def run_hvrun_row(python, args, ranks, env):
    hvrun = os.path.join(args.build_dir, "bin", "hvrun")
    out = subprocess.run([hvrun, "-np", str(ranks)] + worker_command(python, args, "--role", "hvrun"),
                         env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        raise SystemExit("hvrun -np %d failed:\n%s%s" % (ranks, out.stdout, out.stderr))
    return rates_of(out.stdout)


def run_mwms_row(python, args, env):
    workers = ",".join("localhost:%d" % free_port() for _ in range(2))
    procs = [subprocess.Popen(worker_command(python, args, "--role", "mwms", "--workers", workers,
                                             "--worker-index", str(i)),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    rates, failed = {}, []
    for i, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise SystemExit("MultiWorkerMirroredStrategy worker %d did not finish" % i)
        rates.update(rates_of(out))
        if proc.returncode != 0:
            failed.append("worker %d:\n%s" % (i, out[-3000:]))
    if failed:
        raise SystemExit("MultiWorkerMirroredStrategy failed:\n" + "\n".join(failed))
    return rates


def main():
    args = arguments()
    if args.role:
        run_worker(args)
        return
    python = args.python or os.path.join(os.environ.get("HVRUN_VENV", os.path.join(ROOT, ".venv")),
                                         "bin", "python")
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build_dir, "python"),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    rows = [("hvrun", 1, run_hvrun_row(python, args, 1, env)),
            ("hvrun", 2, run_hvrun_row(python, args, 2, env)),
            ("tf.distribute MWMS ring", 2, run_mwms_row(python, args, env))]
    single = sum(rows[0][2].values())
    if not args.json:
        print("# Keras training-step throughput: %d steps (after %d), batch %d per rank, %dx%dx3 images, "
              "CPU; load %s" % (args.steps, args.warmup, args.batch_size, args.image_size,
                                args.image_size, load))
        print("# %-24s %5s %14s %12s %10s" % ("run", "ranks", "img/s per rank", "img/s total",
                                             "scaling"))
    for name, ranks, rates in rows:
        if len(rates) != ranks:
            raise SystemExit("%s: %d of %d ranks reported a rate" % (name, len(rates), ranks))
        total = sum(rates.values())
        scaling = total / (ranks * single)
        if args.json:
            print(json.dumps({"kind": "metric", "name": "keras_fit_img_per_s", "run": name,
                              "ranks": ranks, "per_rank": [rates[r] for r in sorted(rates)],
                              "total": total, "scaling_efficiency": scaling}))
        else:
            per_rank = " ".join("%.1f" % rates[r] for r in sorted(rates))
            print("  %-24s %5d %14s %12.1f %9.0f%%" % (name, ranks, per_rank, total, 100 * scaling))


if __name__ == "__main__":
    sys.exit(main())

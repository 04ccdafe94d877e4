#!/usr/bin/env python3
"""The ResNet-50 gradient step and 4-byte allreduce latency from Python, as Horovod users write
them, through hvrun.torch or horovod.torch (the same code: --api picks the import).

    hvrun -np 2 .venv/bin/python bench/python/step_bench.py --api hvrun
    horovodrun -np 2 --gloo <bench venv>/bin/python bench/python/step_bench.py --api horovod

The step: every tensor of the parameter table (float32, rank + 1 everywhere) submitted with a
named allreduce_async_(op=Average) in backward order, then each handle synchronized; steps/s.
The latency, in microseconds per call on a 4-byte tensor: allreduce_ (in place, blocking),
allreduce (out of place, blocking, the autograd Function Horovod users call) and
synchronize(allreduce_async_). Rank 0 prints one metric per line (benchlib.metric), each name
ending in " [LABEL]". Exit 1 when a reduced element is wrong.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import horovod_api, metric, read_shapes, timed  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=["hvrun", "horovod"], required=True)
    parser.add_argument("--params", default=os.path.join(ROOT, "bench", "data",
                                                         "resnet50_params.txt"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--latency-iters", type=int, default=500)
    parser.add_argument("--latency-warmup", type=int, default=2000,
                        help="untimed calls first: two ranks that spin while they wait can "
                             "share one core for the first ~0.1 s (bench/RESULTS.md 9)")
    parser.add_argument("--label", default=None, help="default: the --api")
    return parser.parse_args()


def main():
    args = arguments()
    torch.set_num_threads(1)  # one rank per core, as every peer in bench/compare
    hvd = horovod_api(args.api)
    label = args.label or args.api
    rank = hvd.rank()
    fill = float(rank + 1)
    want = (hvd.size() + 1) / 2.0
    tensors = [(name, torch.full(shape, fill)) for name, shape in read_shapes(args.params)]

    def step():
        handles = [hvd.allreduce_async_(t, name=name, op=hvd.Average)
                   for name, t in reversed(tensors)]
        for h in handles:
            hvd.synchronize(h)

    step_seconds = timed(args.steps, args.warmup, step)
    wrong = sum(int((t != want).sum()) for _, t in tensors)

    one = torch.ones(1)
    latency = []
    for case, call in [
            ("allreduce_", lambda: hvd.allreduce_(one, name="bench.latency.inplace",
                                                  op=hvd.Average)),
            ("allreduce", lambda: hvd.allreduce(one, name="bench.latency.out", op=hvd.Average)),
            ("allreduce_async_+synchronize",
             lambda: hvd.synchronize(hvd.allreduce_async_(one, name="bench.latency.async",
                                                          op=hvd.Average)))]:
        seconds = timed(args.latency_iters, args.latency_warmup, call)
        latency.append(("py latency %s 4 B [%s]" % (case, label), [s * 1e6 for s in seconds]))
    wrong += int((one != 1.0).sum())

    if rank == 0:
        metric("py step (%d allreduce_async_ avg) [%s]" % (len(tensors), label),
               [1.0 / s for s in step_seconds], "steps/s",
               "%s, %d ranks, %d steps after %d" % (hvd.__name__, hvd.size(), args.steps,
                                                    args.warmup))
        for name, values in latency:
            metric(name, values, "us", "%d calls after %d" % (args.latency_iters,
                                                              args.latency_warmup))
    hvd.shutdown()
    if wrong:
        print("step_bench: rank %d: %d wrong elements (want %g)" % (rank, wrong, want),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

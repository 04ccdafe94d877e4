#!/usr/bin/env python3
"""torch.distributed (gloo backend) on the gradient step bench/compare measures hvrun against.

Started once per rank by bench/compare with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, with
the project's environment (.venv, PyTorch from PyPI).

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        .venv/bin/python bench/peers/torch_gloo_bench.py --params bench/data/resnet50_params.txt

Rank 0 prints one JSON object per line (bench/worker/bench_report.h's metric format): steps/s of
the 161 ResNet-50 gradients allreduced one by one (async, then waited for, then divided: an
Average), the same in DDP-style 25 MiB buckets (backward order, copied into a flat bucket and
back as DDP does by default), one packed allreduce of the same bytes, and the latency of a
4-byte all_reduce in microseconds (blocking, and async_op=True then wait()). With --ddp also
DistributedDataParallel's own reducer on a model with those parameter shapes: the time a
backward through DDP takes beyond the same backward under no_sync().
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
from benchlib import metric, read_shapes, timed  # noqa: E402


def read_params(path):
    return [torch.ones(shape, dtype=torch.float32).view(-1) for _, shape in read_shapes(path)]


class Gradients(torch.nn.Module):
    """A model whose parameters have the table's shapes and whose backward is one cheap pass:
    what DDP's reducer does with their gradients is then most of a backward's time."""

    def __init__(self, shapes):
        super().__init__()
        self.weights = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(shape))
                                              for _, shape in shapes)

    def forward(self):
        return torch.stack([w.sum() for w in self.weights]).sum()


def ddp_reducer_seconds(args):
    """DDP's reducer on the gradient step: backward through DDP (bucket_cap_mb) with its
    allreduce, minus the same backward under no_sync() (no allreduce), taking turns."""
    model = torch.nn.parallel.DistributedDataParallel(Gradients(read_shapes(args.params)),
                                                      bucket_cap_mb=args.bucket_mb)
    synced, local = [], []
    for i in range(args.warmup + args.steps):
        for into, sync in ((synced, True), (local, False)):
            start = time.perf_counter()
            if sync:
                model().backward()
            else:
                with model.no_sync():
                    model().backward()
            if i >= args.warmup:
                into.append(time.perf_counter() - start)
    return statistics.median(synced) - statistics.median(local), statistics.median(local)


def make_buckets(tensors, cap_bytes):
    """DDP's rule: fill buckets in backward order up to cap_bytes each."""
    buckets, current, size = [], [], 0
    for t in reversed(tensors):
        if current and size + t.numel() * 4 > cap_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(t)
        size += t.numel() * 4
    if current:
        buckets.append(current)
    return [(group, torch.empty(sum(t.numel() for t in group))) for group in buckets]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--params", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--latency-iters", type=int, default=500)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--ddp", action="store_true",
                        help="also DDP's reducer on the same shapes (backward with its "
                             "allreduce minus backward under no_sync())")
    args = parser.parse_args()

    torch.set_num_threads(1)  # one rank per core, like the other peers
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    tensors = read_params(args.params)

    def per_tensor():
        works = [dist.all_reduce(t, async_op=True) for t in reversed(tensors)]
        for w in works:
            w.wait()
        for t in tensors:
            t.div_(world)

    buckets = make_buckets(tensors, int(args.bucket_mb * 1024 * 1024))

    def bucketed():
        works = []
        for group, flat in buckets:
            torch.cat(group, out=flat)
            works.append(dist.all_reduce(flat, async_op=True))
        for (group, flat), w in zip(buckets, works):
            w.wait()
            flat.div_(world)
            offset = 0
            for t in group:
                t.copy_(flat[offset:offset + t.numel()])
                offset += t.numel()

    packed = torch.ones(sum(t.numel() for t in tensors))

    def whole():
        dist.all_reduce(packed)
        packed.div_(world)

    one = torch.ones(1)
    rates = lambda seconds: [1.0 / s for s in seconds]
    results = [
        ("torch step (161 async all_reduce)", rates(timed(args.steps, args.warmup, per_tensor)),
         "steps/s"),
        ("torch step (25 MiB buckets)", rates(timed(args.steps, args.warmup, bucketed)),
         "steps/s"),
        ("torch packed all_reduce", rates(timed(args.steps, args.warmup, whole)), "steps/s"),
        ("torch latency all_reduce 4 B",
         [s * 1e6 for s in timed(args.latency_iters, 20, lambda: dist.all_reduce(one))], "us"),
        ("torch latency all_reduce async+wait 4 B",
         [s * 1e6 for s in timed(args.latency_iters, 20,
                                 lambda: dist.all_reduce(one, async_op=True).wait())], "us"),
    ]
    if args.ddp:
        reducer, backward = ddp_reducer_seconds(args)
        results.append(("torch step (DDP reducer, %g MiB buckets)" % args.bucket_mb,
                        [1.0 / reducer], "steps/s"))
    if dist.get_rank() == 0:
        for name, values, unit in results:
            metric(name, values, unit)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

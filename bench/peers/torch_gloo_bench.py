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
4-byte all_reduce in microseconds.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist


def metric(name, values, unit):
    print(json.dumps({"kind": "metric", "name": name, "median": statistics.median(values),
                      "mean": statistics.fmean(values), "unit": unit, "note": ""}), flush=True)


def timed(reps, warmup, body):
    seconds = []
    for i in range(warmup + reps):
        start = time.perf_counter()
        body()
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
    return seconds


def read_params(path):
    tensors = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            numel = 1
            for d in parts[1].split("x"):
                numel *= int(d)
            tensors.append(torch.ones(numel, dtype=torch.float32))
    return tensors


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
    ]
    if dist.get_rank() == 0:
        for name, values, unit in results:
            metric(name, values, unit)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torchvision resnet18 training throughput on synthetic images, one rank of a job, through
hvrun.torch, horovod.torch (DistributedOptimizer, as Horovod users write it) or PyTorch DDP
(gloo, 25 MiB buckets: its defaults).

    hvrun -np 2 .venv/bin/python bench/python/resnet18_train_bench.py --api hvrun
    horovodrun -np 2 --gloo <bench venv>/bin/python bench/python/resnet18_train_bench.py --api horovod
    .venv/bin/python -m torch.distributed.run --nproc-per-node 2 \
        bench/python/resnet18_train_bench.py --api ddp

Every rank trains on its own fixed random batch (3 x S x S images, --batch-size per rank) with
SGD (lr 0.01, momentum 0.9) and cross-entropy, one thread per rank, and prints
"RATE <rank> <img/s>" over the --steps after --warmup; bench/compare adds them up.
"""
import argparse
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import horovod_api  # noqa: E402


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=["hvrun", "horovod", "ddp"], required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=64)
    return parser.parse_args()


def distributed(api, model, optimizer):
    """The model and optimizer wrapped as each framework's users do; returns them and the rank."""
    if api == "ddp":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
        return ddp, optimizer, dist.get_rank(), dist.destroy_process_group
    hvd = horovod_api(api)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    return model, optimizer, hvd.rank(), hvd.shutdown


def main():
    args = arguments()
    torch.set_num_threads(1)  # one rank per core: the 1-rank run computes as each of 2 does
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model, optimizer, rank, finish = distributed(args.api, model, optimizer)
    generator = torch.Generator().manual_seed(rank)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size,
                         generator=generator)
    labels = torch.randint(0, 1000, (args.batch_size,), generator=generator)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    rate = args.batch_size * args.steps / (time.perf_counter() - start)
    if not torch.isfinite(loss):
        print("resnet18_train_bench: rank %d: loss is %s" % (rank, loss.item()), file=sys.stderr)
        return 1
    print("RATE %d %.3f" % (rank, rate), flush=True)
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Data-parallel training of a small CNN on synthetic images, Horovod style.

    hvrun -np 2 python3 examples/pytorch_synthetic.py               # train, then benchmark
    hvrun -np 2 python3 examples/pytorch_synthetic.py --no-train    # benchmark only
    hvrun -np 2 python3 examples/pytorch_synthetic.py --model resnet18 --image-size 64

The model is a small CNN, or any torchvision classifier by name (--model resnet50, as Horovod's
benchmark uses).

Every rank trains on its own shard of a synthetic, learnable data set (labels from a fixed
random "teacher" network) with DistributedOptimizer, then times steps on random batches the way
Horovod's pytorch_synthetic_benchmark.py does and reports img/sec per rank and in total. At the
end every rank checks that its weights are those of every other rank.

Written against Horovod's API: replacing the import below with `import horovod.torch as hvd`
(and running it with horovodrun) needs no other change.
"""
import argparse
import hashlib
import os
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import hvrun.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch synthetic training and benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--model", default="small",
                    help="'small' (a two-layer CNN) or a torchvision model name, e.g. resnet18")
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size (per rank)")
parser.add_argument("--image-size", type=int, default=32, help="synthetic images are S x S x 3")
parser.add_argument("--epochs", type=int, default=3, help="training epochs")
parser.add_argument("--train-samples", type=int, default=512, help="training samples per rank")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate (scaled by size)")
parser.add_argument("--no-train", action="store_true", default=False,
                    help="skip the training run, benchmark only")
parser.add_argument("--num-warmup-batches", type=int, default=5,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=5,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=5, help="number of benchmark iterations")
parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")


class Net(nn.Module):
    """A small CNN: two conv blocks and a classifier, ~0.3 M parameters at 32 x 32."""

    def __init__(self, image_size, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * (image_size // 4) ** 2, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def make_model(args):
    if args.model == "small":
        return Net(args.image_size)
    import torchvision
    if args.model not in torchvision.models.list_models(module=torchvision.models):
        raise SystemExit("--model %s: not a torchvision classifier (e.g. resnet18, resnet50)"
                         % args.model)
    return torchvision.models.get_model(args.model, weights=None, num_classes=10)


def log(text):
    if hvd.rank() == 0:
        print(text, flush=True)


def synthetic_shard(args, device):
    """This rank's shard: random images labelled by a teacher network every rank builds alike."""
    torch.manual_seed(1234)
    teacher = Net(args.image_size).to(device)
    g = torch.Generator().manual_seed(hvd.rank())
    images = torch.randn(args.train_samples, 3, args.image_size, args.image_size, generator=g)
    with torch.no_grad():
        labels = teacher(images.to(device)).argmax(1)
    return images.to(device), labels


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def report_rates(rates, what, device):
    """Prints img/sec of every rank and in total (gathered on rank 0)."""
    mean, conf = float(np.mean(rates)), float(1.96 * np.std(rates))
    every = hvd.allgather_object((hvd.rank(), mean, conf))
    for rank, rank_mean, rank_conf in every:
        log("%s: rank %d: %.1f +-%.1f img/sec" % (what, rank, rank_mean, rank_conf))
    device = "GPU" if device.type == "cuda" else "rank"
    log("%s: Img/sec per %s: %.1f +-%.1f" % (what, device, mean, conf))
    log("%s: Total img/sec on %d %s(s): %.1f +-%.1f"
        % (what, hvd.size(), device, sum(m for _, m, _ in every), hvd.size() * conf))


def train(args, model, optimizer, device):
    images, labels = synthetic_shard(args, device)
    steps = args.train_samples // args.batch_size
    for epoch in range(args.epochs):
        model.train()
        start, total_loss, correct = timeit.default_timer(), 0.0, 0
        order = torch.randperm(args.train_samples, generator=torch.Generator().manual_seed(epoch))
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            output = model(images[idx])
            loss = F.cross_entropy(output, labels[idx])
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            correct += (output.argmax(1) == labels[idx]).sum().item()
        rate = steps * args.batch_size / (timeit.default_timer() - start)
        loss_avg = metric_average(total_loss / steps, "train.loss")
        acc_avg = metric_average(correct / (steps * args.batch_size), "train.accuracy")
        log("Epoch %d: loss %.4f, accuracy %.3f (averaged over %d ranks)"
            % (epoch, loss_avg, acc_avg, hvd.size()))
        report_rates([rate], "Train epoch %d" % epoch, device)


def benchmark(args, model, optimizer, device):
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    target = torch.randint(0, 10, (args.batch_size,), device=device)

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    log("Model: %s, batch size: %d, image size: %d, ranks: %d, PyTorch %s"
        % (args.model, args.batch_size, args.image_size, hvd.size(), torch.__version__))
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    rates = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (x, rate))
        rates.append(rate)
    report_rates(rates, "Benchmark", device)


def check_weights_identical(model):
    """Data parallelism's promise: every rank ends with the same weights, bit for bit (the
    averaged gradients every rank applies are the same bytes). Prints it, or exits naming the
    ranks that differ."""
    digest = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    mine = digest.hexdigest()[:16]
    every = hvd.allgather_object(mine)
    differ = [rank for rank, theirs in enumerate(every) if theirs != mine]
    if differ:
        raise SystemExit("rank %d: weights differ from those of rank(s) %s (checksums %s)"
                         % (hvd.rank(), differ, every))
    print("rank %d: weights identical on all %d ranks (checksum %s)"
          % (hvd.rank(), hvd.size(), mine), flush=True)


def main(args):
    hvd.init()
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())
    else:
        # Ranks share this host's cores: one share each instead of every rank using all of them.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))
    device = torch.device("cuda" if use_cuda else "cpu")

    model = make_model(args).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    if not args.no_train:
        train(args, model, optimizer, device)
    benchmark(args, model, optimizer, device)
    check_weights_identical(model)
    hvd.shutdown()


if __name__ == "__main__":
    main(parser.parse_args())

"""hvrun.torch on CUDA tensors: every rank of `hvrun -np N python torch_gpu_check.py` (one GPU per
rank; scripts/gpu-check runs it) checks Horovod's collectives on CUDA tensors against the values
every rank can compute (results on the input's device, in its dtype; in-place calls in place),
async handles, process-set-free grouped calls, and a DistributedOptimizer training run that
leaves every rank with the same weights. Then it times one gradient step's allreduce (161
tensors, ResNet-50's sizes) through hvrun.torch against torch.distributed on NCCL in the same
job. Prints 'torch gpu check: N checks passed on rank R' and exits 0, or raises.

`--device cpu` runs the same checks on CPU tensors (torch.distributed on Gloo), which checks this
script where there is no GPU.
"""
import os
import shutil
import sys
import tempfile
import time

import torch

import hvrun.torch as hvd

hvd.init()
rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
ON_CPU = sys.argv[1:] == ["--device", "cpu"]
if ON_CPU:
    device = torch.device("cpu")
    device_name = "cpu"
else:
    if not torch.cuda.is_available():
        sys.exit("torch gpu check: torch sees no GPU (a CPU-only torch, or no driver)")
    torch.cuda.set_device(local_rank % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())
    device_name = "%s (%s)" % (device, torch.cuda.get_device_name(device))
checks = 0


def expect(got, want, what, tolerance=0.0):
    """`got` is on the check's device, of `want`'s dtype and shape, and holds `want`'s values."""
    global checks
    assert got.device == device, "%s: result on %s, expected %s" % (what, got.device, device)
    assert got.dtype == want.dtype, "%s: dtype %s, expected %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape))
    g, w = got.detach().cpu().double(), want.detach().cpu().double()
    assert torch.allclose(g, w, atol=tolerance, rtol=tolerance), "%s: %s, expected %s" % (what, g, w)
    checks += 1


def on(values, dtype):
    return torch.as_tensor(values, dtype=torch.float64).to(dtype).to(device)


def synchronize():
    if not ON_CPU:
        torch.cuda.synchronize()


# ---- allreduce in every op and dtype; rank r contributes base + r + 1 (small integers: exact in
# every dtype, float16 and bfloat16 included).
base = torch.arange(6, dtype=torch.float64).reshape(2, 3)
ranks = [base + r + 1 for r in range(size)]
want_by_op = {
    hvd.Sum: sum(ranks),
    hvd.Min: base + 1,
    hvd.Max: base + size,
    hvd.Product: torch.stack(ranks).prod(dim=0),
}
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
              torch.uint8):
    for op, want in want_by_op.items():
        if op == hvd.Product and dtype in (torch.uint8, torch.float16, torch.bfloat16) and size > 2:
            continue  # the product leaves the dtype's exact range
        mine = on(ranks[rank], dtype)
        got = hvd.allreduce(mine, op=op, name="allreduce.%s.%s" % (dtype, op))
        expect(got, on(want, dtype), "allreduce op %s of %s" % (op, dtype))
        expect(mine, on(ranks[rank], dtype), "allreduce's input after the call (%s)" % dtype)
    if dtype.is_floating_point:
        got = hvd.allreduce(on(ranks[rank], dtype), op=hvd.Average, name="average.%s" % dtype)
        expect(got, on(sum(ranks) / size, dtype), "Average of %s" % dtype, tolerance=1e-2)

# In place, with prescale and postscale: the result lands in the caller's storage.
mine = on(ranks[rank], torch.float32)
storage = mine.data_ptr()
same = hvd.allreduce_(mine, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25, name="in_place")
assert same.data_ptr() == storage and mine.data_ptr() == storage, "allreduce_ did not reduce in place"
expect(mine, on(sum(ranks) * 0.5, torch.float32), "allreduce_ with prescale 2, postscale 0.25")

# Async: many handles in flight, polled and synchronized out of order.
handles = [hvd.allreduce_async(on(ranks[rank] * (i + 1), torch.float32), op=hvd.Sum,
                               name="async.%d" % i) for i in range(8)]
for i in reversed(range(8)):
    hvd.poll(handles[i])
    expect(hvd.synchronize(handles[i]), on(sum(ranks) * (i + 1), torch.float32), "async allreduce %d" % i)

# Grouped, in place, of tensors of many shapes and two dtypes.
shapes = [(1,), (7,), (3, 5), (2, 3, 4), (1000,), (33, 17)]
group = [on(torch.full(s, float(rank + 1)), torch.float32 if i % 2 else torch.float16)
         for i, s in enumerate(shapes)]
hvd.grouped_allreduce_(group, op=hvd.Sum, name="grouped")
for i, (s, t) in enumerate(zip(shapes, group)):
    expect(t, on(torch.full(s, float(size * (size + 1) // 2)), t.dtype), "grouped_allreduce_ %d" % i)

# Broadcast, out of place and in place.
got = hvd.broadcast(on(ranks[rank], torch.float32), root_rank=size - 1, name="broadcast")
expect(got, on(ranks[size - 1], torch.float32), "broadcast from the last rank")
mine = on(ranks[rank], torch.int64)
hvd.broadcast_(mine, root_rank=0, name="broadcast_")
expect(mine, on(ranks[0], torch.int64), "broadcast_ from rank 0")

# Allgather: rank r gives r + 1 rows of value r.
got = hvd.allgather(on(torch.full((rank + 1, 3), float(rank)), torch.float32), name="allgather")
want = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(size)])
expect(got, on(want, torch.float32), "allgather of uneven rows")

# Alltoall: rank r sends 2 rows of value 100 r + d to rank d.
send = torch.cat([torch.full((2, 4), 100.0 * rank + d) for d in range(size)])
got = hvd.alltoall(on(send, torch.float32), name="alltoall")
if isinstance(got, tuple):
    got = got[0]
want = torch.cat([torch.full((2, 4), 100.0 * s + rank) for s in range(size)])
expect(got, on(want, torch.float32), "alltoall")

# Reducescatter: every rank gives 2 rows per rank of value r + 1; rank r keeps its 2 rows.
got = hvd.reducescatter(on(torch.full((2 * size, 3), float(rank + 1)), torch.float32), op=hvd.Sum,
                        name="reducescatter")
expect(got, on(torch.full((2, 3), float(size * (size + 1) // 2)), torch.float32), "reducescatter Sum")

# ---- Training: different data on every rank, the same weights after every step.
torch.manual_seed(1234 + rank)  # different initial weights: broadcast_parameters must fix them
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
generator = torch.Generator().manual_seed(99 + rank)
w_true = torch.linspace(-1, 1, 32).unsqueeze(1)
x_cpu = torch.randn(256, 32, generator=generator)
x, y = x_cpu.to(device), (x_cpu @ w_true).to(device)
losses = []
for _ in range(40):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
assert losses[-1] < 0.5 * losses[0], "training did not converge: loss %s -> %s" % (losses[0], losses[-1])
checks += 1
checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
every = hvd.allgather(checksum.to(device), name="weights.checksum")
assert torch.all(every == every[0]), "ranks' weights differ after training: %s" % every.tolist()
checks += 1

# ---- Timing: one gradient step's allreduce (ResNet-50's 161 parameter tensors, float32, Average)
# through hvrun.torch, against torch.distributed on NCCL (Gloo on the CPU) in the same job: one
# all_reduce of the packed bucket (what DDP does), and the same with the pack and unpack.
RESNET50_TENSORS = ([9408, 64, 64] + [4096, 64, 64, 36864, 64, 64, 16384, 256, 256, 16384, 256, 256]
                    + [16384, 64, 64, 36864, 64, 64, 16384, 256, 256] * 2
                    + [32768, 128, 128, 147456, 128, 128, 65536, 512, 512, 131072, 512, 512]
                    + [65536, 128, 128, 147456, 128, 128, 65536, 512, 512] * 3
                    + [131072, 256, 256, 589824, 256, 256, 262144, 1024, 1024, 524288, 1024, 1024]
                    + [262144, 256, 256, 589824, 256, 256, 262144, 1024, 1024] * 5
                    + [524288, 512, 512, 2359296, 512, 512, 1048576, 2048, 2048, 2097152, 2048, 2048]
                    + [1048576, 512, 512, 2359296, 512, 512, 1048576, 2048, 2048] * 2
                    + [2048000, 1000])
assert len(RESNET50_TENSORS) == 161
grads = [torch.full((n,), float(rank + 1), device=device) for n in RESNET50_TENSORS]
megabytes = sum(RESNET50_TENSORS) * 4 / 1e6
steps = int(os.environ.get("HVRUN_TORCH_GPU_CHECK_STEPS", "20"))


def timed(step):
    for _ in range(3):
        step()
    synchronize()
    hvd.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    return (time.perf_counter() - start) / steps * 1e6


def hvrun_step():
    hvd.grouped_allreduce_(grads, op=hvd.Average, name="step")


hvrun_us = timed(hvrun_step)
expect(grads[0][:4], torch.full((4,), float(size + 1) / 2, device=device), "the timed step's result")

import torch.distributed as dist  # noqa: E402

store_dir = hvd.broadcast_object(tempfile.mkdtemp(prefix="hvrun-torch-gpu-check-") if rank == 0 else None,
                                 root_rank=0, name="store_dir")
dist.init_process_group("gloo" if ON_CPU else "nccl", init_method="file://%s/store" % store_dir,
                        rank=rank, world_size=size)
bucket = torch.cat(grads)


def dist_bucket_step():
    dist.all_reduce(bucket)
    bucket.div_(size)


def dist_packed_step():
    flat = torch.cat(grads)
    dist.all_reduce(flat)
    flat.div_(size)
    for g, piece in zip(grads, flat.split(RESNET50_TENSORS)):
        g.copy_(piece)


bucket_us = timed(dist_bucket_step)
packed_us = timed(dist_packed_step)
dist.destroy_process_group()
hvd.barrier()  # every rank is done with the store before it goes
if rank == 0:
    shutil.rmtree(store_dir, ignore_errors=True)
if rank == 0:
    print("torch gpu check: one step's allreduce of %d tensors (%.1f MB float32), %d ranks on %s:"
          % (len(RESNET50_TENSORS), megabytes, size, device_name))
    print("  %-58s %10.1f us" % ("hvrun.torch grouped_allreduce_ (Average)", hvrun_us))
    print("  %-58s %10.1f us" % ("torch.distributed all_reduce of one packed bucket", bucket_us))
    print("  %-58s %10.1f us" % ("torch.distributed cat + all_reduce + split back", packed_us))
    print("  hvrun.torch / torch.distributed bucket: %.2fx; / with the pack: %.2fx"
          % (hvrun_us / bucket_us, hvrun_us / packed_us))
print("torch gpu check: %d checks passed on rank %d (%s)" % (checks, rank, device_name), flush=True)
hvd.shutdown()

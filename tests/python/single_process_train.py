"""A Horovod training script run as `python single_process_train.py`, with no launcher: hvd.init()
makes a job of size 1 (as Horovod does) and every collective works; a few steps of training
with DistributedOptimizer; init again after shutdown. Prints "single process ok" at the end."""
import torch

import hvrun.torch as hvd

hvd.init()
assert (hvd.size(), hvd.rank(), hvd.local_rank(), hvd.local_size()) == (1, 0, 0, 1)
assert (hvd.cross_size(), hvd.cross_rank()) == (1, 0)

x = torch.arange(6, dtype=torch.float32).reshape(3, 2)
assert torch.equal(hvd.allreduce(x, op=hvd.Sum), x)
assert torch.equal(hvd.allreduce(x), x)  # Average over one rank
assert torch.equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0), 2 * x)
assert all(torch.equal(a, b) for a, b in zip(hvd.grouped_allreduce([x, x + 1], op=hvd.Sum),
                                              [x, x + 1]))
assert torch.equal(hvd.allgather(x), x)
assert torch.equal(hvd.broadcast(x, root_rank=0), x)
assert torch.equal(hvd.alltoall(x), x)
assert torch.equal(hvd.reducescatter(x, op=hvd.Sum), x)
assert hvd.broadcast_object({"epoch": 3}, root_rank=0) == {"epoch": 3}
assert hvd.allgather_object("a") == ["a"]
hvd.barrier()
assert hvd.join() == 0

model = torch.nn.Linear(2, 1)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
for _ in range(3):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()

hvd.shutdown()
hvd.init()  # a fresh job of its own
assert hvd.size() == 1
assert torch.equal(hvd.allreduce(x, op=hvd.Sum, name="again"), x)
hvd.shutdown()
print("single process ok")

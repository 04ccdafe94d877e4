"""The training both runs do, under RayExecutor and under `hvrun -np 4`: a small MLP, each rank
its own data, hvrun.torch's DistributedOptimizer. Returns the final weights (one float64 array).

    hvrun -np 4 python ray_train.py OUT_PREFIX    (each rank writes OUT_PREFIX.RANK.npy)
"""
import os
import signal
import sys

STEPS = 30


def train(steps=STEPS, kill_rank=None, kill_step=None, marker=None):
    import numpy as np
    import torch
    import hvrun.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    data = torch.Generator().manual_seed(100 + hvd.rank())
    for step in range(steps):
        if step == kill_step and hvd.rank() == kill_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        x = torch.randn(8, 16, generator=data)
        y = torch.randn(8, 4, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        if marker and step == 0 and hvd.rank() == 0:
            open(marker, "w").close()
    weights = np.concatenate([p.detach().double().numpy().ravel() for p in model.parameters()])
    hvd.shutdown()
    return weights


if __name__ == "__main__":
    import numpy as np
    result = train()
    np.save("%s.%s.npy" % (sys.argv[1], os.environ["HVRUN_RANK"]), result)

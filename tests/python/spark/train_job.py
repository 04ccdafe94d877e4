"""A small hvrun.torch training, the same under `hvrun -np 4 python train_job.py OUT` and as the
function of hvrun.spark.run: each rank trains on batches of its own, and returns the final
weights (rank 0 writes them to OUT under hvrun)."""
import json
import sys


def train(steps=6):
    import torch
    import hvrun.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)  # the same start on every rank; broadcast_parameters makes it sure
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    batches = torch.Generator().manual_seed(1000 + hvd.rank())
    for _ in range(steps):
        x = torch.randn(16, 8, generator=batches)
        y = torch.sin(x).sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    weights = {name: value.detach().flatten().tolist() for name, value in model.state_dict().items()}
    print("rank %d of %d trained" % (hvd.rank(), hvd.size()))
    hvd.shutdown()
    return weights


if __name__ == "__main__":
    import os
    result = train()
    if os.environ.get("HVRUN_RANK") == "0":
        with open(sys.argv[1], "w") as out:
            json.dump(result, out)

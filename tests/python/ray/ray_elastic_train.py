"""The elastic training of test_ray_elastic.py, run by every rank through ElasticRayExecutor.

At step PAUSE_STEP every rank makes the file `paused.HOST.PID` and waits for the file `go` (the
test removes a Ray node in between, and waits for its ranks to be gone), then training goes on
to STEPS: the others reset from their last commit without the removed node's ranks."""
import os
import time

STEPS = 12
PAUSE_STEP = 5


def train(folder):
    import torch
    import hvrun.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
    sizes = []

    @hvd.elastic.run
    def loop(state):
        while state.step < STEPS:
            if state.step == PAUSE_STEP and not os.path.exists(os.path.join(folder, "go")):
                open(os.path.join(folder, "paused.%s.%d" % (os.environ["HVRUN_HOST"],
                                                            os.getpid())), "w").close()
                deadline = time.monotonic() + 120
                while not os.path.exists(os.path.join(folder, "go")):
                    if time.monotonic() > deadline:
                        raise TimeoutError("the test never said go")
                    time.sleep(0.05)
            sizes.append(hvd.size())
            x = torch.full((3, 4), 1.0 + state.step)
            optimizer.zero_grad()
            model(x).sum().backward()
            for i, p in enumerate(model.parameters()):
                p.grad = hvd.allreduce(p.grad, name="grad.%d" % i)
            optimizer.step()
            state.step += 1
            state.commit()

    loop(state)
    weights = [p.detach().double().numpy().ravel().tolist() for p in model.parameters()]
    return {"rank": hvd.rank(), "size": hvd.size(), "host": os.environ.get("HVRUN_HOST"), "step": state.step, "sizes": sizes,
            "weights": weights}


def fail_on_rank(rank):
    """Raises on rank `rank` after init: a failure of the program, which ends the job."""
    import hvrun.torch as hvd
    hvd.init()
    if hvd.rank() == rank:
        raise ValueError("rank %d gives up" % rank)
    hvd.allreduce(__import__("torch").ones(1), name="after")

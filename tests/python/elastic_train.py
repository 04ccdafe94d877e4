"""An elastic trainer for tests/python/test_elastic.py, written as Horovod's elastic users write
theirs: a linear model trained with SGD on a fixed synthetic dataset, an ElasticSampler, a
TorchState committed every few steps, and hvd.elastic.run around the loop.

Every step's global batch (every rank's sample indices, in rank order, gathered) is appended
to state.log, which the state commits and restores with the model: at the end rank 0 prints the
final weights and the log of the steps that count, and the test replays that log in one process
to get the weights the job must have reached. Float64 throughout, so only summation order
differs from the replay.

Faults, by the rank each process was started as (HVRUN_RANK at launch, which a reset does not
change): ELASTIC_KILL="ID:STEP" SIGKILLs process ID at the start of global step STEP (the other
ranks are then inside that step's collectives); ELASTIC_KILL_IN_RESTORE=ID SIGKILLs process ID
as it restores the last commit (a second failure during the reset of the first).
ELASTIC_SLOW="ID:SECONDS" makes process ID sleep SECONDS in every step before its allreduces
(a straggler: the others wait for it), and every rank mark its steps for the straggler
attribution. ELASTIC_MISMATCH=STEP makes every rank allreduce a tensor of its own shape at step STEP (an error
of the program, which a reset cannot mend). ELASTIC_GROW="FILE:STEP:TEXT" makes rank 0 write TEXT into FILE (the discovery script's input)
at step STEP. ELASTIC_EPOCHS, ELASTIC_STEP_SLEEP (seconds per step) and ELASTIC_PRINT_STEPS
make room and a progress line for tests that act from outside.

ELASTIC_SPARE_READY=FILE: a hot spare prints what init() gave it and what a collective before
hvd.elastic.run does, then creates FILE once its start-up is done (model, optimizer, state
built); the process ELASTIC_KILL names waits for FILE before it dies, so the spare's start-up
is known to have run before any rank was lost.
"""
import json
import os
import signal
import sys
import time

import torch

import hvrun.torch as hvd
from hvrun import HvrunError

N, D, BATCH, LR = 96, 4, 4, 0.05
EPOCHS = int(os.environ.get("ELASTIC_EPOCHS", "2"))
COMMIT_EVERY = 2
STEP_SLEEP = float(os.environ.get("ELASTIC_STEP_SLEEP", "0"))
PRINT_STEPS = os.environ.get("ELASTIC_PRINT_STEPS") == "1"  # rank 0: "STEP n SIZE s" per step
LAUNCH_ID = int(os.environ.get("HVRUN_RANK", "-1"))
SLOW = os.environ.get("ELASTIC_SLOW", "").split(":") if os.environ.get("ELASTIC_SLOW") else None
SPARE_READY = os.environ.get("ELASTIC_SPARE_READY", "")
IS_SPARE = os.environ.get("HVRUN_ELASTIC_SPARE") == "1"


def report_spare_start_up():
    try:
        hvd.allreduce(torch.zeros(1), name="spare.too_early")
        collective = "ran"
    except HvrunError as e:
        collective = "refused: %s" % e
    print("SPARE STARTED rank %d size %d local_rank %d; a collective %s"
          % (hvd.rank(), hvd.size(), hvd.local_rank(), collective), flush=True)


def wait_for_the_spare():
    deadline = time.monotonic() + 60
    while not os.path.exists(SPARE_READY) and time.monotonic() < deadline:
        time.sleep(0.01)


def fault(name, parts=2):
    text = os.environ.get(name, "")
    return text.split(":", parts - 1) if text else None


def dataset():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = x @ torch.arange(1.0, D + 1, dtype=torch.float64) + 0.1 * torch.randn(
        N, generator=g, dtype=torch.float64)
    return x, y


def main():
    hvd.init()
    x, y = dataset()
    model = torch.nn.Linear(D, 1, bias=False).double()
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    sampler = hvd.elastic.ElasticSampler(list(range(N)), shuffle=True, seed=3)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=0,
                                   step=0, log=[])
    kill = fault("ELASTIC_KILL")
    grow = fault("ELASTIC_GROW", 3)
    kill_in_restore = os.environ.get("ELASTIC_KILL_IN_RESTORE", "")
    if kill_in_restore and int(kill_in_restore) == LAUNCH_ID:
        original = state.restore

        def restore_then_die():
            print("KILLING myself (launched as rank %d) in restore" % LAUNCH_ID, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            original()

        state.restore = restore_then_die

    @hvd.elastic.run
    def train(state):
        while state.epoch < EPOCHS:
            mine = list(iter(state.sampler))
            for start in range(0, len(mine), BATCH):
                if kill and int(kill[0]) == LAUNCH_ID and state.step == int(kill[1]):
                    if SPARE_READY:
                        wait_for_the_spare()
                    print("KILLING myself (launched as rank %d) at step %d" % (LAUNCH_ID, state.step),
                          flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                if grow and hvd.rank() == 0 and state.step == int(grow[1]):
                    with open(grow[0], "w") as f:
                        f.write(grow[2].replace(",", "\n") + "\n")
                if os.environ.get("ELASTIC_MISMATCH") == str(state.step):
                    hvd.allreduce(torch.zeros(hvd.rank() + 1), name="mismatch")
                batch = mine[start:start + BATCH]
                xb, yb = x[batch], y[batch]
                optimizer.zero_grad()
                loss = 0.5 * ((model(xb).squeeze(1) - yb) ** 2).sum()
                loss.backward()
                if SLOW and int(SLOW[0]) == LAUNCH_ID:
                    time.sleep(float(SLOW[1]))
                grad = hvd.allreduce(model.weight.grad, op=hvd.Sum, name="grad")
                count = hvd.allreduce(torch.tensor([float(len(batch))], dtype=torch.float64),
                                      op=hvd.Sum, name="count")
                model.weight.grad.copy_(grad / count)
                optimizer.step()
                # Every rank records the global batch: a rank lost later loses no record of it.
                everyone = [i for b in hvd.allgather_object(batch, name="batch") for i in b]
                state.log.append([state.epoch, hvd.size(), everyone])
                state.sampler.record_indices(everyone)
                state.step += 1
                if SLOW:
                    hvd.mark_step()
                if PRINT_STEPS and hvd.rank() == 0:
                    print("STEP %d SIZE %d" % (state.step, hvd.size()), flush=True)
                if STEP_SLEEP:
                    time.sleep(STEP_SLEEP)
                if state.step % COMMIT_EVERY == 0:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()

    if IS_SPARE and SPARE_READY:
        report_spare_start_up()
        open(SPARE_READY, "w").close()
    train(state)
    if hvd.rank() == 0:
        print("RESULT " + json.dumps({"weights": model.weight.detach().view(-1).tolist(),
                                      "log": state.log, "size": hvd.size()}), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())

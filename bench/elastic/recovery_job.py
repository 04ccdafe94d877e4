"""The job bench/elastic/recovery times: a small PyTorch model trained with SGD on synthetic data,
2-3 ranks on this host, one rank SIGKILLed at a fixed step. The same model, data and step run
under hvrun's elastic mode (--launcher hvrun: hvrun.torch.elastic, TorchState committed every
COMMIT steps; the survivors reset and go on, with a hot spare in the lost rank's place when hvrun
was given --spares) and under torchrun's elastic restart (--launcher
torchrun: DDP over gloo, rank 0 checkpointing every COMMIT steps; torchrun stops every worker and
starts them all again, which then load the checkpoint) and under torchft (--launcher torchft: one
process per replica group, each with its own store, a torchft Manager over its Gloo process group
reporting to the lighthouse that bench/elastic/recovery starts; a step whose allreduce failed is
not committed, and the survivors go on without the lost group once the lighthouse gives a new
quorum).

Every rank prints "STEP <global step> SIZE <world size> LIFE <l> T <unix time>" after each
completed step (LIFE 1 before the failure, then 2, 3, ...: after each of hvrun's resets or
torchrun's restarts, or each change of torchft's quorum; LIFE 0 while torchft's first quorums
still lack a replica group); the killed rank prints "KILL T <unix time>" just before it dies.
Recovery = the first step completed in a later life, less the kill's time.
"""
import argparse
import os
import signal
import time

import torch

HIDDEN = 512
BATCH = 32


def model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, 10))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 256, generator=g)
    y = torch.randint(0, 10, (BATCH,), generator=g)
    return model, x, y


def step(model, optimizer, x, y):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()


def report(step_no, size, life):
    print("STEP %d SIZE %d LIFE %d T %.6f" % (step_no, size, life, time.time()), flush=True)


def maybe_kill(args, launch_rank, step_no, first_life):
    if first_life and launch_rank == args.kill_rank and step_no == args.kill_at:
        print("KILL T %.6f" % time.time(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def run_hvrun(args):
    import hvrun.torch as hvd
    hvd.init()
    if os.environ.get("HVRUN_ELASTIC_SPARE") == "1":
        # When the parked spare was given a place: what follows is its own start-up.
        print("SPARE JOINED T %.6f" % time.time(), flush=True)
    model, x, y = model_and_data()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
    launch_rank = int(os.environ["HVRUN_RANK"])
    # A hot spare (hvrun --spares) first trains after a failure: its first life is the second.
    lives = [1 if os.environ.get("HVRUN_ELASTIC_SPARE") == "1" else 0]

    @hvd.elastic.run
    def train(state):
        lives[0] += 1  # run() calls this again after each reset
        while state.step < args.steps:
            maybe_kill(args, launch_rank, state.step, True)
            step(model, optimizer, x, y)
            handles = [hvd.allreduce_async_(p.grad, name="g%d" % i, op=hvd.Average)
                       for i, p in enumerate(model.parameters())]
            for h in handles:
                hvd.synchronize(h)
            optimizer.step()
            state.step += 1
            report(state.step, hvd.size(), lives[0])
            if state.step % args.commit == 0:
                state.commit()

    train(state)
    hvd.shutdown()


def run_torchrun(args):
    import datetime
    import torch.distributed as dist
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    first_life = restarts == 0
    # The agent's store outlives a restart, and on this PyTorch a restarted group's Gloo read the
    # dead workers' addresses from it (connectFullMesh: connection refused, every restart): each
    # life's keys get a prefix of their own.
    store = dist.PrefixStore("life%d" % restarts, dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
        timeout=datetime.timedelta(seconds=60)))
    dist.init_process_group("gloo", store=store, rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
    model, x, y = model_and_data()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    launch_rank = dist.get_rank()
    start = 0
    if os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start = saved["step"]
    for step_no in range(start, args.steps):
        maybe_kill(args, launch_rank, step_no, first_life)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
        report(step_no + 1, dist.get_world_size(), restarts + 1)
        if (step_no + 1) % args.commit == 0 and launch_rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step_no + 1}, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)
    dist.destroy_process_group()


def start_together(start_dir, replica, replicas):
    """Waits until every replica group has come this far. The lighthouse gives a quorum of the
    groups already asking (at least --min-replicas), so a group still importing torch would
    otherwise join only after the kill; torchrun and hvrun start their ranks together likewise."""
    open(os.path.join(start_dir, "ready%d" % replica), "w").close()
    deadline = time.time() + 120
    while sum(1 for name in os.listdir(start_dir) if name.startswith("ready")) < replicas:
        if time.time() > deadline:
            raise SystemExit("replica group %d: the other groups did not start in 120 s" % replica)
        time.sleep(0.01)


def run_torchft(args):
    import datetime
    import torch.distributed as dist
    import torchft
    replica = int(os.environ["REPLICA_GROUP_ID"])
    # One process per replica group: the group's own store, which the Manager connects to.
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    model, x, y = model_and_data()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def load(state):
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])

    manager = torchft.Manager(
        pg=torchft.ProcessGroupGloo(timeout=datetime.timedelta(seconds=60)),
        load_state_dict=load,
        state_dict=lambda: {"model": model.state_dict(), "optimizer": optimizer.state_dict()},
        min_replica_size=args.min_replicas, replica_id="replica%d" % replica,
        store_addr="127.0.0.1", store_port=store.port, rank=0, world_size=1,
        hostname="127.0.0.1", init_sync=False)  # every replica builds the same seeded model
    ddp = torchft.DistributedDataParallel(manager, model)
    ft_optimizer = torchft.Optimizer(manager, optimizer)
    start_together(args.start_dir, replica, args.replicas)
    # Replica groups join the lighthouse one by one, so the first quorums may lack some: life 0
    # until every group has taken part, so that the first life is the whole job's, as elsewhere.
    life, participants = 0, None
    while manager.current_step() < args.steps:
        maybe_kill(args, replica, manager.current_step(), True)
        before = manager.current_step()
        ft_optimizer.zero_grad()  # starts the quorum for this step
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        ft_optimizer.step()  # steps only when every participant's allreduce succeeded
        if manager.current_step() == before:
            continue  # not committed: the same step again, in the next quorum
        if life == 0 and manager.num_participants() == args.replicas:
            life = 1
        elif life > 0 and manager.num_participants() != participants:
            life += 1
        participants = manager.num_participants()
        report(manager.current_step(), participants, life)
    manager.shutdown(wait=False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--launcher", choices=["hvrun", "torchrun", "torchft"], required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kill-at", type=int, default=30)
    parser.add_argument("--kill-rank", type=int, default=1)
    parser.add_argument("--commit", type=int, default=5)
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--min-replicas", type=int, default=2)
    parser.add_argument("--start-dir", default="")
    args = parser.parse_args()
    if args.launcher == "torchft" and not args.start_dir:
        parser.error("--launcher torchft needs --start-dir (a folder the replica groups share)")
    torch.set_num_threads(1)
    if args.launcher == "hvrun":
        run_hvrun(args)
    elif args.launcher == "torchrun":
        run_torchrun(args)
    else:
        run_torchft(args)


if __name__ == "__main__":
    main()

"""bench/compare --python: hvrun from Python beside Horovod and PyTorch DDP, in one run.

Each round runs, back to back, 2 ranks each on loopback, each peer under its own launcher:
  C++           hvrun_gradient_bench --step-alone (hvrun -np 2): the step the Python one is
                measured against, its steps back to back as the Python ones are;
  hvrun.torch   bench/python/step_bench.py --api hvrun (hvrun -np 2, the project's .venv);
  Horovod       the same program, --api horovod, under horovodrun --gloo, --mpi, and --mpi with
                fusion off (the bench environment of scripts/install-bench-deps; skipped, with a
                line saying so, when it is absent);
  DDP           bench/peers/torch_gloo_bench.py --ddp under torch.distributed.run (the .venv's,
                not Debian's /usr/bin/torchrun, which runs another Python): 25 MiB buckets
                all_reduced by hand and DDP's own reducer, 4-byte all_reduce.
Then the training rows, once: resnet18_train_bench.py on 1 rank and on 2 for each framework.
Every launch prints the load first. Ratios are taken within a round, then their median.
"""
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEP = "step (161 async allreduce avg) [C++]"


def bench_python():
    venv = os.environ.get("HVRUN_BENCH_VENV", os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "hvrun", "bench-venv"))
    return os.path.join(venv, "bin", "python")


class Peers:
    """The launch command of every peer, sized by the flags."""

    def __init__(self, args, torch_python, tools):
        self.args, self.tools, self.py = args, tools, torch_python
        self.hvd_py = bench_python()
        self.horovodrun = os.path.join(os.path.dirname(self.hvd_py), "horovodrun")
        self.hvrun = [os.path.join(args.build_dir, "bin", "hvrun"), "-np"]
        self.env = dict(os.environ, HVRUN_DEVICE="cpu", OMP_NUM_THREADS="1",
                        CUDA_VISIBLE_DEVICES="",
                        PYTHONPATH=os.path.join(args.build_dir, "python"))
        self.mpi_env = dict(self.env, OMPI_ALLOW_RUN_AS_ROOT="1",
                            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HOROVOD_CPU_OPERATIONS="mpi")
        self.sizes = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
        self.latency = ["--latency-iters", str(args.latency_iters), "--latency-warmup",
                        "20" if args.tiny else "2000"]

    def horovod_missing(self):
        """Why Horovod's rows cannot run, or None."""
        if not os.access(self.horovodrun, os.X_OK):
            return "%s is missing: run scripts/install-bench-deps" % self.horovodrun
        return None

    def hvrun_job(self, ranks, program):
        return self.hvrun + [str(ranks), "-H", "localhost:%d" % ranks] + program

    def horovod_job(self, ranks, controller, program, fusion=True):
        job = [self.horovodrun, "-np", str(ranks), "-H", "localhost:%d" % ranks,
               "--" + controller]
        if not fusion:
            job += ["--fusion-threshold-mb", "0"]
        return job + [self.hvd_py] + program

    def ddp_job(self, ranks, program):
        return [self.py, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                "--master-addr", "127.0.0.1", "--master-port", str(self.tools.free_port())] + program

    def step_rounds(self):
        """(label, command, env) of one round of the step and latency rows."""
        a = self.args
        step = [os.path.join(HERE, "step_bench.py"), "--params", a.params] + self.sizes + \
            self.latency
        # --step-alone: C++'s steps back to back, as step_bench.py runs the Python ones (a
        # reference taking turns would push the tensors out of the caches between two steps).
        jobs = [("C++", self.hvrun_job(2, [os.path.join(a.build_dir, "bin", "hvrun_gradient_bench"),
                                            "--step-alone", "--params", a.params, "--json",
                                            "--label", "C++"] + self.sizes),
                 self.env),
                ("hvrun.torch", self.hvrun_job(2, [self.py] + step + ["--api", "hvrun",
                                                                       "--label", "hvrun.torch"]),
                 self.env)]
        if not self.horovod_missing():
            hvd = step + ["--api", "horovod"]
            jobs += [("horovod gloo", self.horovod_job(2, "gloo", hvd + ["--label", "horovod gloo"]),
                      self.env),
                     ("horovod mpi", self.horovod_job(2, "mpi", hvd + ["--label", "horovod mpi"]),
                      self.mpi_env),
                     ("horovod mpi, fusion off",
                      self.horovod_job(2, "mpi", hvd + ["--label", "horovod mpi, fusion off"],
                                       fusion=False), self.mpi_env)]
        jobs.append(("ddp", self.ddp_job(2, [os.path.join(ROOT, "bench", "peers",
                                                          "torch_gloo_bench.py"),
                                             "--params", a.params, "--ddp", "--latency-iters",
                                             str(a.latency_iters)] + self.sizes), self.env))
        return jobs

    def training(self):
        """(framework, ranks, command, env) of every training row."""
        a = self.args
        train = [os.path.join(HERE, "resnet18_train_bench.py"), "--steps", str(a.train_steps),
                 "--warmup", str(a.train_warmup)]
        if a.tiny:
            train += ["--batch-size", "2", "--image-size", "32"]
        rows = []
        for ranks in (1, 2):
            rows.append(("hvrun.torch", ranks,
                         self.hvrun_job(ranks, [self.py] + train + ["--api", "hvrun"]), self.env))
        if not self.horovod_missing():
            hvd = train + ["--api", "horovod"]
            rows += [("horovod gloo", 1, self.horovod_job(1, "gloo", hvd), self.env),
                     ("horovod gloo", 2, self.horovod_job(2, "gloo", hvd), self.env),
                     ("horovod mpi", 2, self.horovod_job(2, "mpi", hvd), self.mpi_env)]
        for ranks in (1, 2):
            rows.append(("ddp", ranks, self.ddp_job(ranks, train + ["--api", "ddp"]), self.env))
        return rows


def rates_of(output):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"RATE (\d+) ([0-9.]+)", output)}


def med(values):
    return statistics.median(values) if values else None


def step_table(rounds):
    """Every metric's median over the rounds with its range, and the ratios of the targets."""
    names = []
    for r in rounds:
        names += [n for n in r if n not in names]
    lines = []
    for name in names:
        values = [r[name]["median"] for r in rounds if name in r]
        unit = next(r[name]["unit"] for r in rounds if name in r)
        lines.append({"kind": "compare", "case": name, "median": med(values),
                      "min": min(values), "max": max(values), "rounds": len(values),
                      "unit": unit})

    def ratio(ours, theirs, invert=False):
        """Median over rounds of ours/theirs (theirs/ours for times), each in one round."""
        found = []
        for r in rounds:
            if ours in r and theirs in r:
                a, b = r[ours]["median"], r[theirs]["median"]
                found.append(b / a if invert else a / b)
        return found

    py = "py step (161 allreduce_async_ avg) [%s]"
    targets = []

    def target(text, values, goal):
        if values:
            targets.append("%s: %.2fx median of %d rounds (%s; target %s)" % (
                text, med(values), len(values), ", ".join("%.2f" % v for v in values), goal))
    target("step, hvrun.torch / C++", ratio(py % "hvrun.torch", STEP), ">= 0.97x")
    for peer in ("horovod gloo", "horovod mpi", "horovod mpi, fusion off"):
        target("step, hvrun.torch / %s" % peer, ratio(py % "hvrun.torch", py % peer), "> 1x")
    target("step, hvrun.torch / DDP reducer (25 MiB)",
           ratio(py % "hvrun.torch", "torch step (DDP reducer, 25 MiB buckets)"), "> 1x")
    target("step, hvrun.torch / DDP-style 25 MiB buckets by hand",
           ratio(py % "hvrun.torch", "torch step (25 MiB buckets)"), "> 1x")
    for case, goal in (("allreduce_", "<= 2 us"), ("allreduce", "<= 2 us"),
                       ("allreduce_async_+synchronize", "<= 10 us")):
        name = "py latency %s 4 B [hvrun.torch]" % case
        values = [r[name]["median"] for r in rounds if name in r]
        if values:
            targets.append("4-byte %s from Python, hvrun.torch: %.1f us median of %d rounds "
                           "(target %s)" % (case, med(values), len(values), goal))
    return lines, targets


def training_table(results):
    """img/s per rank and total, and scaling against the same framework's 1-rank run."""
    single = {name: sum(rates.values()) for name, ranks, rates in results if ranks == 1}
    single.setdefault("horovod mpi", single.get("horovod gloo"))
    rows = []
    for name, ranks, rates in results:
        total = sum(rates.values())
        base = single.get(name)
        rows.append({"kind": "training", "framework": name, "ranks": ranks,
                     "per_rank": [rates[r] for r in sorted(rates)], "total": total,
                     "scaling": total / (ranks * base) if base else None})
    return rows


def main(args, tools, torch_python):
    import json
    as_json = args.json
    peers = Peers(args, torch_python, tools)
    missing = peers.horovod_missing()
    if missing:
        tools.note("Horovod: skipped (%s)" % missing, as_json)
    rounds = []
    for _ in range(args.rounds):
        found = {}
        for _, command, env in peers.step_rounds():
            found.update(tools.run(command, env, as_json))
        rounds.append(found)
    trained = []
    if not args.no_training:
        for name, ranks, command, env in peers.training():
            out = tools.run_output(command, env, as_json)
            rates = rates_of(out)
            if len(rates) != ranks:
                sys.exit("compare: %s on %d ranks: %d ranks reported a rate:\n%s"
                         % (name, ranks, len(rates), out[-3000:]))
            trained.append((name, ranks, rates))
    tools.note("load %s (end)" % tools.load(), as_json)
    lines, targets = step_table(rounds)
    training = training_table(trained)
    if as_json:
        for row in lines + training:
            print(json.dumps(row))
        for line in targets:
            print(json.dumps({"kind": "target", "text": line}))
        return
    print("# from Python: ResNet-50 gradient step (161 tensors, %d steps after %d) and 4-byte "
          "latency, 2 ranks; median over %d rounds [min-max]" % (args.steps, args.warmup,
                                                                 args.rounds))
    print("%-58s %10s %21s %-8s" % ("case", "median", "rounds [min-max]", "unit"))
    for row in lines:
        print("%-58s %10.2f %21s %-8s" % (row["case"], row["median"], "%d [%.2f-%.2f]" % (
            row["rounds"], row["min"], row["max"]), row["unit"]))
    if training:
        print("# resnet18 training, synthetic 3x%dx%d, batch %d per rank, SGD, %d steps after %d"
              % (((32, 32, 2) if args.tiny else (64, 64, 16)) + (args.train_steps,
                                                                 args.train_warmup)))
        print("%-24s %5s %16s %12s %9s" % ("framework", "ranks", "img/s per rank", "img/s total",
                                          "scaling"))
        for row in training:
            scaling = "%.0f%%" % (100 * row["scaling"]) if row["scaling"] else "-"
            print("%-24s %5d %16s %12.1f %9s" % (row["framework"], row["ranks"], " ".join(
                "%.1f" % v for v in row["per_rank"]), row["total"], scaling))
    for line in targets:
        print("# " + line)

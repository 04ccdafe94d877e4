#!/usr/bin/env python3
"""4-byte allreduce latency from Python through hvrun.torch, builds side by side in one run.

    bench/frameworks/torch_latency.py [--build-dir DIR ...] [--pairs 3] [--calls 20000]
                                      [--np 2] [--json] [--python PATH]

For each round of --pairs, every build in turn runs one 2-rank job (interleaved, so the
machine's load falls on every build alike). Each job times, on every rank, blocking
`allreduce_(t, name="x")`, blocking `allreduce(t, name="z")` (into a new tensor) and
`synchronize(allreduce_async_(t, name="y"))` on a 1-element float32 CPU tensor: after a warm-up,
five batches of --calls (blocking) and --calls / 4 (async) calls, each batch's mean per call; the row is the median of those batch means on rank 0, and
the table gives each build's median over the pairs. The load average is printed before and
after. Needs the project's Python environment with torch (HVRUN_VENV, else <source>/.venv) and
builds with the Python packages (default <source>/build).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 600

RANK_PROGRAM = r"""
import statistics, sys, time, torch, hvrun.torch as hvd
calls = int(sys.argv[1])
hvd.init()
t = torch.ones(1)
for _ in range(3000):
    hvd.allreduce_(t, name="x", op=hvd.Sum)
    hvd.allreduce(t, name="z", op=hvd.Sum)
    hvd.synchronize(hvd.allreduce_async_(t, name="y", op=hvd.Sum))
def batches(n, call):
    means = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            call()
        means.append((time.perf_counter() - start) / n * 1e6)
    return means
blocking = batches(calls, lambda: hvd.allreduce_(t, name="x", op=hvd.Sum))
out_of_place = batches(calls, lambda: hvd.allreduce(t, name="z", op=hvd.Sum))
async_sync = batches(max(calls // 4, 1),
                     lambda: hvd.synchronize(hvd.allreduce_async_(t, name="y", op=hvd.Sum)))
if hvd.rank() == 0:
    print("RESULT %.3f %.3f %.3f" % (statistics.median(blocking), statistics.median(async_sync),
                                     statistics.median(out_of_place)))
hvd.shutdown()
"""


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", action="append", default=[],
                        help="a build with the Python packages (repeat to compare builds)")
    parser.add_argument("--pairs", type=int, default=3, help="rounds over the builds")
    parser.add_argument("--calls", type=int, default=20000, help="blocking calls per batch")
    parser.add_argument("--np", type=int, default=2, help="ranks per job")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--python", help="the Python with torch (default: the project's venv)")
    return parser.parse_args()


def python_executable(given):
    if given:
        return given
    venv = os.environ.get("HVRUN_VENV", os.path.join(ROOT, ".venv"))
    return os.path.join(venv, "bin", "python")


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def run_job(build, python, np, calls):
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1", HVRUN_BIN_DIR=os.path.join(build, "bin"))
    command = [os.path.join(build, "bin", "hvrun"), "-np", str(np), "--bind-to", "block",
               python, "-c", RANK_PROGRAM, str(calls)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    for line in done.stdout.splitlines():
        if "RESULT " in line:  # "[0]<stdout>:RESULT ..." through hvrun's output prefix
            fields = line.split("RESULT ")[1].split()
            return float(fields[0]), float(fields[1]), float(fields[2])
    raise SystemExit("job with %s failed (exit %d):\n%s\n%s" %
                     (build, done.returncode, done.stdout[-2000:], done.stderr[-2000:]))


def main():
    args = arguments()
    builds = [os.path.abspath(b) for b in (args.build_dir or [os.path.join(ROOT, "build")])]
    python = python_executable(args.python)
    load_before = load()
    results = {b: [] for b in builds}
    for _ in range(args.pairs):
        for build in builds:
            results[build].append(run_job(build, python, args.np, args.calls))
    load_after = load()
    rows = []
    for build in builds:
        blocking = [r[0] for r in results[build]]
        async_sync = [r[1] for r in results[build]]
        out_of_place = [r[2] for r in results[build]]
        rows.append({"build": build, "blocking_us": blocking, "async_synchronize_us": async_sync,
                     "out_of_place_us": out_of_place,
                     "blocking_median_us": statistics.median(blocking),
                     "async_synchronize_median_us": statistics.median(async_sync),
                     "out_of_place_median_us": statistics.median(out_of_place)})
    if args.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "rows": rows},
                         indent=2))
        return
    print("# load average before %s, after %s; %d ranks, %d pairs" %
          (load_before, load_after, args.np, args.pairs))
    print("%-40s %28s %28s %28s" % ("build", "blocking allreduce_ (us)",
                                     "blocking allreduce (us)", "async + synchronize (us)"))
    for row in rows:
        print("%-40s %28s %28s %28s" % (
            row["build"][-40:],
            "%.2f [%s]" % (row["blocking_median_us"],
                           " ".join("%.2f" % v for v in row["blocking_us"])),
            "%.2f [%s]" % (row["out_of_place_median_us"],
                           " ".join("%.2f" % v for v in row["out_of_place_us"])),
            "%.2f [%s]" % (row["async_synchronize_median_us"],
                           " ".join("%.1f" % v for v in row["async_synchronize_us"]))))


if __name__ == "__main__":
    sys.exit(main())

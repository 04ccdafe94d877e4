"""What the Python bench programs share: the metric line, timing, the parameter table, the API.

A metric is one JSON object per line in bench/worker/bench_report.h's format, which bench/compare
reads from every program alike, C++ or Python.
"""
import json
import statistics
import time


def metric(name, values, unit, note=""):
    print(json.dumps({"kind": "metric", "name": name, "median": statistics.median(values),
                      "mean": statistics.fmean(values), "unit": unit, "note": note}), flush=True)


def timed(reps, warmup, body):
    """Seconds of each of `reps` calls of body(), after `warmup` untimed ones."""
    seconds = []
    for i in range(warmup + reps):
        start = time.perf_counter()
        body()
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
    return seconds


def read_shapes(path):
    """(name, shape) per "name 64x3x7x7" line of a parameter table (bench/data/)."""
    shapes = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                shapes.append((parts[0], tuple(int(d) for d in parts[1].split("x"))))
    if not shapes:
        raise SystemExit("%s lists no tensors" % path)
    return shapes


def horovod_api(api):
    """horovod.torch or hvrun.torch, initialised: the same calls work on both."""
    if api == "hvrun":
        import hvrun.torch as hvd
    else:
        import horovod.torch as hvd
    hvd.init()
    return hvd

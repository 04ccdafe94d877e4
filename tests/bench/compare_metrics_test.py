"""bench/compare reads the metric objects of a job's output as launchers print them: behind a
rank tag, and with Open MPI's next tag glued to the end of the line (mpirun under
horovodrun --mpi), which once dropped Horovod MPI's step row from whole rounds."""
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "..", "bench", "compare")


def load_compare():
    loader = importlib.machinery.SourceFileLoader("bench_compare", COMPARE)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_compare", loader))
    loader.exec_module(module)
    return module


def main():
    compare = load_compare()
    output = "\n".join([
        '[1,0]<stdout>:{"kind": "metric", "name": "py step [horovod mpi]", "median": 11.5, '
        '"mean": 11.4, "unit": "steps/s", "note": "2 ranks"}[1,0]<stdout>:',
        '[0]<stdout>:{"kind":"metric","name":"step [x]","median":50.9,"mean":51.0,'
        '"unit":"steps/s","note":""}',
        '{"kind": "metric", "name": "bare", "median": 1, "mean": 1, "unit": "us"}',
        '[1,1]<stderr>:not json {at all',
        '{"kind": "note", "text": "not a metric"}',
    ])
    found = compare.metrics_of(output)
    want = {"py step [horovod mpi]": 11.5, "step [x]": 50.9, "bare": 1}
    got = {name: obj["median"] for name, obj in found.items()}
    if got != want:
        print("metrics_of read %r, want %r" % (got, want))
        return 1
    print("ok: %d metrics" % len(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())

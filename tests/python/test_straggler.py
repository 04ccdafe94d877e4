"""Straggler attribution from Python: hvrun.torch's and hvrun's mark_phase in a real 2-rank hvrun
job in which one rank sleeps 20 ms more per step in "data". hvrun's summary and its
--straggler-warning-ms warning name that rank and the phase (wide bands: a loaded machine).

Starts its own hvrun jobs (not run under hvrun itself); each is bounded, and its process group is
killed by pid if it overstays."""
import os
import re
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = re.compile(r'hvrun: straggler: rank (\d+) on \S+ was last in (\d+)% of (\d+) steps, '
                     r'([0-9.]+) ms late at the median; its phase "(\w+)" grew most')
WARNING = re.compile(r'straggler: rank (\d+) on \S+ was last by 10\.0 ms or more in (\d+) of the '
                     r'last 10 steps, ([0-9.]+) ms late at the median; its phase "(\w+)" grew most')


def run_job(args, timeout):
    """Runs hvrun in its own session; kills the whole group when it overstays."""
    hvrun = os.path.join(os.environ["HVRUN_BIN_DIR"], "hvrun")
    proc = subprocess.Popen([hvrun] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError("hvrun job did not finish within %d s:\n%s" % (timeout, out))
    return proc.returncode, out


@pytest.mark.parametrize("api,slow_rank", [("torch", 1), ("numpy", 0), ("tf", 1)])
def test_mark_phase_names_the_slow_rank_and_its_phase(api, slow_rank):
    if api == "tf":
        pytest.importorskip("tensorflow")
    code, out = run_job(["-np", "2", "--device", "cpu", "--straggler-warning-ms", "10",
                         sys.executable, os.path.join(HERE, "straggler_worker.py"), api,
                         str(slow_rank), "20", "60"], timeout=90)
    assert code == 0, out
    summary = SUMMARY.search(out)
    assert summary, out
    assert int(summary.group(1)) == slow_rank, out
    assert int(summary.group(2)) >= 60, out
    assert 8.0 < float(summary.group(4)) < 200.0, out
    assert summary.group(5) == "data", out
    warning = WARNING.search(out)
    assert warning, out
    assert int(warning.group(1)) == slow_rank, out
    assert warning.group(4) == "data", out


def test_mark_phase_is_in_every_namespace():
    import hvrun
    import hvrun.torch
    assert callable(hvrun.mark_phase)
    assert "mark_phase" in hvrun.__all__
    assert hvrun.torch.mark_phase is hvrun.basics.mark_phase
    assert "mark_phase" in hvrun.torch.__all__


def test_mark_phase_in_the_tensorflow_namespace():
    pytest.importorskip("tensorflow")
    import tensorflow as tf

    import hvrun.tensorflow
    assert callable(hvrun.tensorflow.mark_phase) and callable(hvrun.tensorflow.mark_step)
    # Inside a tf.function the marks are ops of the graph (run each time it runs).

    @tf.function
    def step():
        hvrun.tensorflow.mark_phase("data")
        hvrun.tensorflow.mark_step()
        return tf.constant(0)

    graph = step.get_concrete_function().graph
    types = [op.type for op in graph.get_operations()]
    assert "HvrunMarkPhase" in types and "HvrunMarkStep" in types, types

"""A killed peer raises HorovodInternalError on the surviving rank (never a hang).

Starts its own small hvrun job (not run under hvrun itself); every wait is bounded and the job's
process group is killed by pid if it overstays."""
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def hvrun_binary():
    return os.path.join(os.environ["HVRUN_BIN_DIR"], "hvrun")


def run_job(args, timeout, env=None):
    """Runs hvrun in its own session; kills the whole group when it overstays."""
    proc = subprocess.Popen([hvrun_binary()] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError("hvrun job did not finish within %d s:\n%s" % (timeout, out))
    return proc.returncode, out


def test_killed_peer_raises_on_survivor():
    start = time.monotonic()
    code, out = run_job(["-np", "2", "--grace-period", "20", sys.executable,
                         os.path.join(HERE, "killed_peer_worker.py")], timeout=60)
    elapsed = time.monotonic() - start
    assert "KILLING rank 1" in out, out
    raised = re.search(r"\[0\]<stdout>:RAISED after ([0-9.]+) s: HorovodInternalError: (.*)", out)
    assert raised, out
    assert float(raised.group(1)) < 10.0, out  # promptly, not after an operation timeout
    assert "rank 1" in raised.group(2), out     # names the rank that died
    assert code != 0, out                       # the job failed: rank 1 was killed
    assert elapsed < 45, out

"""Failures told truly from Python (each test starts its own small hvrun job; every wait is
bounded and the job's process group is killed by pid if it overstays):
 - a rank ending with an uncaught exception is reported as failing, with the exception's text,
   not as saying goodbye;
 - names that cannot be tensor names raise TensorNameError at submission and break nothing;
 - a second registration in a live process fails at once with ALREADY_EXISTS."""
import os
import re
import sys

import pytest

from test_faults import run_job

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "failure_report_worker.py")


def test_uncaught_exception_is_reported_as_the_ranks_failure():
    code, out = run_job(["-np", "3", "--op-timeout", "20", "--grace-period", "10",
                         sys.executable, WORKER, "raise-on-rank-1"], timeout=60)
    assert code != 0, out
    assert "ValueError: boom at step 3" in out, out  # Python's own traceback, on rank 1
    cause = (r"rank 1 on host \S+ \(pid \d+\) failed: uncaught Python exception: "
             r"ValueError: boom at step 3 \(raised at .*failure_report_worker\.py:\d+ in "
             r"raise_on_rank_1\)")
    # Every other rank's collective fails with the coordinator's abort, which names rank 1 as
    # the cause and carries the exception's text (at step 3, or at step 2 when the abort
    # overtook that step's plan on this rank).
    for survivor in (0, 2):
        caught = re.search(r"\[%d\]<stdout>:CAUGHT at step [23]: job aborted: (.*)" % survivor, out)
        assert caught, out
        assert re.search(cause, caught.group(1)), out
    # The coordinator logged the abort with the same reason, and hvrun's headline carries it.
    assert re.search(r"\[hvrun\] \[error\] job aborted: " + cause, out), out
    assert re.search(r"hvrun: job failed: .*rank 1 on", out), out
    assert "NO ERROR" not in out, out


@pytest.mark.parametrize("run", range(20))
def test_the_headline_names_the_rank_that_raised_every_time(run):
    # The failing rank's exit races its peers' (which fail on the abort it caused): whichever
    # exit hvrun reads first, the headline and the summary's marked row are rank 1's. The
    # headline reads "rank 1 ... exited with code 1 (coordinator: ...)" when rank 1's exit came
    # in time, else "job aborted: rank 1 ... failed: ..." (it still tears down); both name it.
    code, out = run_job(["-np", "3", "--op-timeout", "20", "--grace-period", "5", sys.executable,
                         os.path.join(HERE, "exception_rank_worker.py")], timeout=60)
    assert code != 0, out
    headline = [line for line in out.splitlines() if line.startswith("hvrun: job failed:")]
    assert len(headline) == 1, out
    assert re.match(r"hvrun: job failed: (job aborted: )?rank 1 on", headline[0]), out
    assert "uncaught Python exception: ValueError: boom at step 3" in headline[0], out
    marked = [line for line in out.splitlines()
              if line.endswith(("<- first failure", "<- named by the coordinator"))]
    assert len(marked) == 1 and re.match(r"hvrun: 1 ", marked[0]), out


def test_names_that_cannot_be_tensor_names_raise_at_submission():
    code, out = run_job(["-np", "2", "--op-timeout", "20", sys.executable, WORKER, "names"],
                        timeout=60)
    assert code == 0, out
    assert "incompatible function arguments" not in out, out
    assert out.count("NAMES OK") == 2, out


def test_second_init_in_a_live_process_fails_at_once():
    code, out = run_job(["-np", "2", "--op-timeout", "20", sys.executable, WORKER, "second-init"],
                        timeout=60)
    assert code == 0, out
    assert out.count("SECOND INIT REFUSED") == 2, out

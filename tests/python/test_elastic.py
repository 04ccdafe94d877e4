"""Elastic jobs end to end (label `elastic`): hvrun jobs of elastic_train.py that lose ranks,
wait for and regain slots through a discovery script, and grow, each checked against a replay
of the steps the job says counted (same samples, same order): the final weights must equal the
replay's, every sample of every epoch must have been seen, and the membership sizes must be the
ones the faults imply.

Each job runs in its own session with a bounded wait; its whole process group is killed by pid
if it overstays (run_job)."""
import json
import os
import re
import sys

import pytest
import torch

from test_faults import run_job

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "elastic_train.py")
sys.path.insert(0, HERE)
import elastic_train  # noqa: E402  (the dataset and hyper-parameters the replay needs)


def result_of(out):
    found = re.search(r"^\[\d+\]<stdout>:RESULT (.*)$", out, re.M)
    assert found, out
    return json.loads(found.group(1))


def replay(log):
    """The weights a single process reaches taking the logged global batches in order."""
    x, y = elastic_train.dataset()
    w = torch.zeros(elastic_train.D, dtype=torch.float64)
    for _epoch, _size, batch in log:
        xb, yb = x[batch], y[batch]
        grad = ((xb @ w - yb)[:, None] * xb).sum(0) / len(batch)
        w = w - elastic_train.LR * grad
    return w


def check_job(out, code, final_size, sizes_seen):
    assert code == 0, out
    result = result_of(out)
    log = result["log"]
    assert result["size"] == final_size, out
    assert [s for s in dict.fromkeys(size for _, size, _ in log)] == sizes_seen, (
        [size for _, size, _ in log], out)
    for epoch in range(elastic_train.EPOCHS):
        seen = [i for e, _, batch in log if e == epoch for i in batch]
        # Every sample once; padding repeats at most size - 1 per partition (one per reset).
        assert set(seen) == set(range(elastic_train.N)), (epoch, sorted(seen))
        assert len(seen) - elastic_train.N <= 8, (epoch, len(seen))
    expected = replay(log)
    got = torch.tensor(result["weights"], dtype=torch.float64)
    assert torch.allclose(got, expected, rtol=1e-9, atol=1e-12), (got, expected)
    return result


def elastic_job(args, env, timeout=150):
    full_env = dict(os.environ)
    full_env.update(env)
    return run_job(args + [sys.executable, TRAINER], timeout=timeout, env=full_env)


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_lost_rank_job_goes_on_with_survivors(backend):
    code, out = elastic_job(["-np", "3", "--min-np", "2", "--cpu-backend", backend,
                             "--elastic-timeout", "60"], {"ELASTIC_KILL": "2:5"})
    assert "KILLING myself (launched as rank 2) at step 5" in out, out
    assert re.search(r"elastic: the worker started as rank 2 on host \S+ \(pid \d+\) was killed "
                     r"by SIGKILL; blacklisted: \S+ \(1 failure, blacklisted for the rest of the "
                     r"job\); 2 ranks left", out), out
    check_job(out, code, final_size=2, sizes_seen=[3, 2])


def test_second_failure_during_the_reset():
    code, out = elastic_job(["-np", "4", "--min-np", "2", "--elastic-timeout", "60"],
                            {"ELASTIC_KILL": "3:5", "ELASTIC_KILL_IN_RESTORE": "2"})
    assert "KILLING myself (launched as rank 2) in restore" in out, out
    check_job(out, code, final_size=2, sizes_seen=[4, 2])


def test_below_min_np_waits_for_the_host_to_come_back(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    code, out = elastic_job(["-np", "2", "--min-np", "2", "--elastic-timeout", "60",
                             "--host-discovery-script", "cat " + str(hosts),
                             "--blacklist-cooldown-range", "1", "2"],
                            {"ELASTIC_KILL": "1:5"})
    assert "fewer than --min-np 2; waiting up to 60 s" in out, out
    assert "1 rank(s) added (localhost slot 1)" in out, out
    check_job(out, code, final_size=2, sizes_seen=[2])


def test_below_min_np_fails_naming_what_was_lost():
    # Without a discovery script nothing can offer a slot: the job fails at once, not after
    # --elastic-timeout (600 s here).
    code, out = elastic_job(["-np", "2", "--min-np", "2", "--elastic-timeout", "600"],
                            {"ELASTIC_KILL": "1:5"}, timeout=90)
    assert code != 0, out
    assert re.search(r"elastic: 1 ranks, fewer than --min-np 2, and this job cannot add ranks "
                     r"\(no --host-discovery-script offers slots\); lost: the worker started as "
                     r"rank 1 on host \S+ \(pid \d+\) was killed by SIGKILL", out), out
    assert "waiting up to" not in out, out


def test_discovered_slots_join_at_the_next_commit(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    code, out = elastic_job(["-np", "2", "--max-np", "3", "--elastic-timeout", "60",
                             "--host-discovery-script", "cat " + str(hosts)],
                            {"ELASTIC_GROW": "%s:3:localhost:3" % hosts, "ELASTIC_EPOCHS": "3",
                             "ELASTIC_STEP_SLEEP": "0.15"})
    assert "1 rank(s) added (localhost slot 2)" in out, out
    check_job(out, code, final_size=3, sizes_seen=[2, 3])


def test_a_slot_the_script_no_longer_lists_is_withdrawn(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:3\n")
    code, out = elastic_job(["-np", "3", "--min-np", "2", "--elastic-timeout", "60",
                             "--host-discovery-script", "cat " + str(hosts)],
                            {"ELASTIC_GROW": "%s:3:localhost:2" % hosts, "ELASTIC_EPOCHS": "3",
                             "ELASTIC_STEP_SLEEP": "0.15"})
    assert "the discovery script no longer lists the slots of process(es) 2: stopping them" in out, out
    assert re.search(r"elastic: withdrawn, the discovery script no longer lists them: the worker "
                     r"started as rank 2 on host \S+; 2 ranks left", out), out
    assert "blacklisted" not in out, out
    check_job(out, code, final_size=2, sizes_seen=[3, 2])


def test_an_error_of_the_program_is_raised_not_reset_for_ever():
    code, out = elastic_job(["-np", "2", "--min-np", "1", "--elastic-timeout", "20"],
                            {"ELASTIC_MISMATCH": "3"}, timeout=90)
    assert code != 0, out
    assert "HorovodInternalError" in out and "mismatch" in out, out
    assert "membership" not in out, out  # nobody reset: the error went to the trainer


def reference_run():
    """The same training on 3 ranks, uninterrupted: the data order a job that keeps its world
    size must follow exactly."""
    code, out = elastic_job(["-np", "3", "--min-np", "3", "--elastic-timeout", "60"], {})
    return check_job(out, code, final_size=3, sizes_seen=[3])


def test_a_spare_takes_a_killed_ranks_place_and_the_world_size_stays(tmp_path):
    ready = tmp_path / "spare-ready"
    code, out = elastic_job(["-np", "3", "--spares", "1", "--elastic-timeout", "60"],
                            {"ELASTIC_KILL": "1:5", "ELASTIC_SPARE_READY": str(ready)})
    assert re.search(r"spare\(s\) started \(\S+ slot 3\), parked until a rank is lost", out), out
    # The spare ran the trainer's start-up up to hvd.elastic.run before rank 1 died (rank 1
    # waited for it): init() parked it without a place, with the identity it will likely get
    # (the last rank of 3; its own slot's local rank), and refused a collective, saying why.
    assert re.search(r"SPARE STARTED rank 2 size 3 local_rank 3; a collective refused: hvrun: "
                     r"this process is a hot spare \(hvrun --spares\), parked until a rank is "
                     r"lost: it joins the job in hvd.elastic.run", out), out
    assert out.index("SPARE STARTED") < out.index("KILLING myself"), out
    assert "KILLING myself (launched as rank 1) at step 5" in out, out
    assert re.search(r"elastic: the worker started as rank 1 on host \S+ \(pid \d+\) was killed "
                     r"by SIGKILL; blacklisted: \S+ \(1 failure, blacklisted for the rest of the "
                     r"job\); spare\(s\) in the lost ranks' place: the worker started as rank 3 "
                     r"on host \S+; 3 ranks, 0 spare\(s\) left", out), out
    # The world size never changed, and the weights are those of the uninterrupted run.
    result = check_job(out, code, final_size=3, sizes_seen=[3])
    reference = reference_run()
    assert result["log"] == reference["log"]
    assert result["weights"] == reference["weights"], (result["weights"], reference["weights"])


def test_a_used_spare_is_replaced_on_a_slot_the_script_offers(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:4\n")
    code, out = elastic_job(["-np", "3", "--spares", "1", "--elastic-timeout", "60",
                             "--host-discovery-script", "cat " + str(hosts),
                             "--blacklist-cooldown-range", "1", "2"],
                            {"ELASTIC_KILL": "0:5", "ELASTIC_EPOCHS": "4",
                             "ELASTIC_STEP_SLEEP": "0.2"})
    assert "spare(s) started (localhost slot 3), parked until a rank is lost; 1 spare(s) ready" \
        in out, out
    assert re.search(r"spare\(s\) in the lost ranks' place: the worker started as rank 3 on host "
                     r"localhost; 3 ranks, 0 spare\(s\) left", out), out
    # Once localhost's cool-down is over, the lost rank's slot holds a new spare.
    assert "spare(s) started (localhost slot 0), parked until a rank is lost; 1 spare(s) ready" \
        in out, out
    assert re.search(r"its 1 spare\(s\) are stopped", out), out
    check_job(out, code, final_size=3, sizes_seen=[3])


STRAGGLER_JOB = ["-np", "3", "--spares", "1", "--elastic-timeout", "60"]
STRAGGLER_ENV = {"ELASTIC_SLOW": "1:0.06", "ELASTIC_EPOCHS": "6"}


def test_a_straggler_is_replaced_by_the_spare_when_asked_and_the_world_size_stays():
    code, out = elastic_job(STRAGGLER_JOB + ["--replace-stragglers", "--straggler-replace-ms", "20",
                                             "--straggler-replace-window", "10"], STRAGGLER_ENV)
    found = re.search(r"elastic: rank 1 on host \S+ \(the worker started as rank 1, pid \d+\) was "
                      r"last by 20\.0 ms or more in (\d+) of the last 10 steps, ([\d.]+) ms late "
                      r"at the median \(--replace-stragglers\): stopping it \(SIGTERM\); a spare "
                      r"takes its place", out)
    assert found, out
    assert int(found.group(1)) > 5 and float(found.group(2)) >= 20, out
    assert re.search(r"elastic: the worker started as rank 1 on host \S+ was stopped as a "
                     r"straggler; spare\(s\) in the lost ranks' place: the worker started as "
                     r"rank 3 on host \S+; 3 ranks, 0 spare\(s\) left", out), out
    assert "blacklisted" not in out, out  # a slow rank's host did not fail
    check_job(out, code, final_size=3, sizes_seen=[3])


@pytest.mark.parametrize("flags", [[], ["--replace-stragglers", "--straggler-replace-ms", "1000",
                                        "--straggler-replace-window", "10"]],
                         ids=["without_the_flag", "not_slow_enough"])
def test_a_straggler_is_never_replaced_otherwise(flags):
    code, out = elastic_job(STRAGGLER_JOB + flags, STRAGGLER_ENV)
    # Rank 1 was the straggler (the summary says so), yet nobody was stopped or replaced.
    assert re.search(r"hvrun: straggler: rank 1 on \S+ was last in", out), out
    assert "stopping it" not in out and "stopped as a straggler" not in out, out
    assert "spare(s) in the lost ranks' place" not in out and "not replaced" not in out, out
    check_job(out, code, final_size=3, sizes_seen=[3])


def test_replacing_stragglers_without_spares_is_refused():
    code, out = elastic_job(["-np", "2", "--min-np", "1", "--replace-stragglers"], {}, timeout=60)
    assert code != 0, out
    assert "--replace-stragglers needs --spares N" in out, out

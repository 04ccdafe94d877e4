"""An elastic Keras job end to end (labels `tensorflow;elastic`): elastic_keras_train.py under
`hvrun -np 3 --min-np 2`, the process launched as rank 2 SIGKILLing itself mid-epoch. The job
must succeed with the two survivors, which must have reset once, resumed from the last commit
and finished every epoch with the same weights and optimizer state; those weights must be what
one process reaches taking the steps that counted (the global batches, in order). With
`--spares 1` the spare takes the killed rank's place and every step runs on 3 ranks.

The job runs in its own session with a bounded wait; its whole process group is killed by pid
if it overstays (run_job)."""
import json
import os
import re
import sys

import numpy as np
import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("tensorflow")

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "elastic_keras_train.py")
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import elastic_keras_train as trainer  # noqa: E402  (the data, model and constants of the replay)
from test_faults import run_job  # noqa: E402  (hvrun in its own session, bounded)

TRAINED = re.compile(r"^\[(\d+)\]<stdout>:TRAINED epoch (\d+) done (\d+) size (\d+)$", re.M)
FINAL = re.compile(r"^\[(\d+)\]<stdout>:FINAL rank (\d+) size (\d+) epoch (\d+) iterations (\d+) "
                   r"weights (\w+) optimizer (\w+)$", re.M)


def replay(steps):
    """The weights of one process that starts from rank 0's first weights and takes, in order,
    the global batch of every (epoch, batches done, size) in `steps`."""
    model = trainer.make_model(1)  # the process launched as rank 0 (seed = launch rank + 1)
    model.compile(optimizer=keras.optimizers.SGD(trainer.LR, momentum=trainer.MOMENTUM),
                  loss="mse")
    for epoch, done, size in steps:
        parts = [trainer.share(epoch, r, size, done - 1) for r in range(size)]
        x = np.concatenate([p[0][:trainer.BATCH] for p in parts])
        y = np.concatenate([p[1][:trainer.BATCH] for p in parts])
        model.train_on_batch(x, y)
    return model.get_weights()


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_keras_job_goes_on_without_a_killed_rank(backend):
    env = dict(os.environ)
    env.update({"ELASTIC_KILL": "2:1:3", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    code, out = run_job(["-np", "3", "--min-np", "2", "--cpu-backend", backend,
                         "--elastic-timeout", "60", sys.executable, TRAINER], timeout=130, env=env)
    assert code == 0, out
    assert "KILLING myself (launched as rank 2) at epoch 1 batch 3" in out, out
    assert re.search(r"elastic: the worker started as rank 2 on host \S+ \(pid \d+\) was killed "
                     r"by SIGKILL; .*2 ranks left", out), out
    assert "elastic job finished after 1 reset(s), on 2 ranks at the end" in out, out
    assert "[0]<stdout>:RESET rank 0 size 2" in out, out
    assert "[1]<stdout>:RESET rank 1 size 2" in out, out

    # The survivors: 3 ranks until the kill, then 2, from the batch after the last commit
    # (every COMMIT_EVERY = 2 batches: 2 of epoch 1's batches were committed, the third is
    # done again) to the end of the last epoch.
    for launched in ("0", "1"):
        trained = [tuple(map(int, m[1:])) for m in TRAINED.findall(out) if m[0] == launched]
        sizes = [size for _, _, size in trained]
        first_at_2 = sizes.index(2)
        assert set(sizes[:first_at_2]) == {3} and set(sizes[first_at_2:]) == {2}, trained
        assert trained[first_at_2 - 1] == (1, 3, 3), trained
        assert trained[first_at_2] == (1, 3, 2), trained
        assert trained[-1] == (trainer.EPOCHS - 1, trainer.STEPS, 2), trained
        assert len(trained) - first_at_2 == (trainer.STEPS - 2) + trainer.STEPS, trained

    finals = FINAL.findall(out)
    assert sorted((f[0], f[1]) for f in finals) == [("0", "0"), ("1", "1")], out
    for _, _, size, epoch, iterations, _, _ in finals:
        assert (int(size), int(epoch)) == (2, trainer.EPOCHS), out
        # The optimizer's count went back to the commit with the model: every step counted once.
        assert int(iterations) == trainer.EPOCHS * trainer.STEPS, out
    assert finals[0][5] == finals[1][5], out  # the same weights on both survivors
    assert finals[0][6] == finals[1][6], out  # and the same optimizer state

    # The steps that counted: the last time each (epoch, batches done) was trained (a reset
    # trains again what came after the last commit).
    rank0 = [tuple(map(int, m[1:])) for m in TRAINED.findall(out) if m[0] == "0"]
    counted = {}
    for epoch, done, size in rank0:
        counted[(epoch, done)] = size
    steps = [(e, d, counted[(e, d)]) for e, d in sorted(counted)]
    assert len(steps) == trainer.EPOCHS * trainer.STEPS
    found = re.search(r"^\[0\]<stdout>:WEIGHTS (.*)$", out, re.M)
    assert found, out
    got = [np.array(w, dtype=np.float32) for w in json.loads(found.group(1))]
    expected = replay(steps)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)  # a wrong step: ~0.07 off


def test_keras_job_keeps_its_size_with_a_spare_in_the_killed_ranks_place():
    env = dict(os.environ)
    env.update({"ELASTIC_KILL": "2:1:3", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    code, out = run_job(["-np", "3", "--spares", "1", "--elastic-timeout", "60", sys.executable,
                         TRAINER], timeout=130, env=env)
    assert code == 0, out
    assert "KILLING myself (launched as rank 2) at epoch 1 batch 3" in out, out
    assert re.search(r"spare\(s\) in the lost ranks' place: the worker started as rank 3 on host "
                     r"\S+; 3 ranks, 0 spare\(s\) left", out), out
    assert "elastic job finished after 1 reset(s), on 3 ranks at the end" in out, out
    # Every step ran on 3 ranks; the spare (launched as rank 3) finished as rank 2, with the
    # survivors' weights and optimizer state.
    rank0 = [tuple(map(int, m[1:])) for m in TRAINED.findall(out) if m[0] == "0"]
    assert {size for _, _, size in rank0} == {3}, rank0
    finals = FINAL.findall(out)
    assert sorted((f[0], f[1]) for f in finals) == [("0", "0"), ("1", "1"), ("3", "2")], out
    for _, _, size, epoch, iterations, _, _ in finals:
        assert (int(size), int(epoch)) == (3, trainer.EPOCHS), out
        assert int(iterations) == trainer.EPOCHS * trainer.STEPS, out
    assert len({f[5] for f in finals}) == 1 and len({f[6] for f in finals}) == 1, out
    # The weights: those of the steps of an uninterrupted 3-rank run, in order.
    steps = [(e, d, 3) for e in range(trainer.EPOCHS) for d in range(1, trainer.STEPS + 1)]
    found = re.search(r"^\[0\]<stdout>:WEIGHTS (.*)$", out, re.M)
    assert found, out
    got = [np.array(w, dtype=np.float32) for w in json.loads(found.group(1))]
    for g, e in zip(got, replay(steps)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)

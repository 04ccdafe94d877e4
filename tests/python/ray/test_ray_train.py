"""hvrun as a Ray Train backend (HvrunConfig) on a real two-node Ray cluster (conftest.py): a
DataParallelTrainer's 4 workers train as hvrun ranks and end with equal weights."""
import os

import numpy as np
import pytest

import ray_train

try:
    import ray.train  # noqa: F401
except ImportError as missing:
    pytestmark = pytest.mark.skip(
        reason="ray.train cannot be imported in this environment (%s): scripts/install-deps "
               "installs Ray's train extras (python/requirements-dev.txt)" % missing)


def _train_loop(config):
    weights = ray_train.train()
    np.save(os.path.join(config["folder"], "w.%s.npy" % os.environ["HVRUN_RANK"]), weights)


def test_data_parallel_trainer_on_hvrun(ray_cluster, tmp_path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
    from hvrun.ray.train_backend import HvrunConfig
    trainer = DataParallelTrainer(
        _train_loop, train_loop_config={"folder": str(tmp_path)},
        backend_config=HvrunConfig(timeout_s=60),
        scaling_config=ScalingConfig(num_workers=4, resources_per_worker={"CPU": 1}),
        run_config=RunConfig(storage_path=str(tmp_path / "storage"), name="hvrun"))
    trainer.fit()
    weights = [np.load(str(tmp_path / ("w.%d.npy" % r))) for r in range(4)]
    for w in weights[1:]:
        np.testing.assert_array_equal(w, weights[0])

"""ElasticRayExecutor on a real Ray cluster (conftest.py): a job over two Ray nodes loses one
(removed from the cluster mid-training) and finishes on the other's ranks."""
import os
import threading
import time

import ray_elastic_train


def test_job_survives_a_removed_ray_node(ray_cluster, tmp_path):
    from hvrun.ray import ElasticRayExecutor
    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=4,
                                                  elastic_timeout=60, timeout_s=60)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    folder = str(tmp_path)
    outcome = {}

    def run():
        try:
            outcome["results"] = executor.run(lambda: ray_elastic_train.train(folder))
        except BaseException as error:
            outcome["error"] = error
    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 240
    while not os.path.exists(os.path.join(folder, "paused")) and runner.is_alive():
        assert time.monotonic() < deadline, "the training never reached its pause"
        time.sleep(0.1)
    assert "error" not in outcome, outcome.get("error")
    ray_cluster.remove_node(ray_cluster.nodes[1])
    open(os.path.join(folder, "go"), "w").close()
    runner.join(300)
    assert not runner.is_alive()
    assert "error" not in outcome, outcome.get("error")
    results = outcome["results"]
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["size"] == 2 and r["step"] == ray_elastic_train.STEPS
        assert r["sizes"][0] == 4 and r["sizes"][-1] == 2
        assert r["weights"] == results[0]["weights"]

"""ElasticRayExecutor on a real Ray cluster (conftest.py): a job over two Ray nodes loses one
(removed from the cluster mid-training) and finishes on the other's ranks; nothing of the job is
left running, and its control token reaches no Ray log."""
import os
import threading
import time

import ray_elastic_train
from hvrun.ray.discovery import host_name
from test_ray_executor import process_alive, files_holding


def _paused(folder):
    """(host, pid) of each rank waiting at the pause."""
    return [(name.split(".", 1)[1].rsplit(".", 1)[0], int(name.rsplit(".", 1)[1]))
            for name in os.listdir(folder) if name.startswith("paused.")]


def processes_holding(token):
    """Pids of this machine's processes whose environment holds `token`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_failing_rank_fails_the_run_naming_it(ray_cluster):
    # Runs first: the next test removes a node.
    import pytest
    from hvrun.ray import ElasticJobFailed, ElasticRayExecutor
    executor = ElasticRayExecutor(ElasticRayExecutor.create_settings(
        min_num_proc=2, max_num_proc=4, elastic_timeout=30, timeout_s=60))
    executor.start()
    with pytest.raises(ElasticJobFailed) as failure:
        executor.run(lambda: ray_elastic_train.fail_on_rank(1))
    message = str(failure.value)
    assert "rank 1 on host ray-" in message and "gives up" in message, message
    token = executor._job.token
    deadline = time.monotonic() + 30
    while processes_holding(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_holding(token) == []


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
    deadline = time.monotonic() + 60
    while executor._job is None and runner.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    token = executor._job.token
    # Without the job's token the driver answers nothing, not even the function.
    from hvrun.ray import control_channel
    with control_channel.connect(executor._job.address, "fn", "0" * 64) as stranger:
        assert stranger.recv(1) == b""
    deadline = time.monotonic() + 240
    while len(_paused(folder)) < 4 and runner.is_alive():
        assert time.monotonic() < deadline, "the training never reached its pause"
        time.sleep(0.1)
    assert "error" not in outcome, outcome.get("error")
    removed = ray_cluster.nodes[1]
    victims = [pid for host, pid in _paused(folder)
               if host == host_name(removed.node_id)]
    assert len(victims) == 2
    ray_cluster.remove_node(removed)
    # Its ranks go with the node (actor, agent, ranks); the others go on once they have.
    deadline = time.monotonic() + 60
    while any(process_alive(pid) for pid in victims):
        assert time.monotonic() < deadline, "the removed node's ranks outlived it"
        time.sleep(0.1)
    open(os.path.join(folder, "go"), "w").close()
    runner.join(300)
    assert not runner.is_alive()
    assert "error" not in outcome, outcome.get("error")
    results = outcome["results"]
    assert [r["rank"] for r in results] == [0, 1]
    head = host_name(ray_cluster.nodes[0].node_id)
    assert [r["host"] for r in results] == [head, head]
    for r in results:
        assert r["size"] == 2 and r["step"] == ray_elastic_train.STEPS
        assert r["sizes"][0] == 4 and r["sizes"][-1] == 2
        assert r["weights"] == results[0]["weights"]

    # hvrun, the relays, the agents and the ranks are gone; the token is in no Ray file.
    deadline = time.monotonic() + 30
    while processes_holding(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_holding(token) == []
    assert files_holding(ray_cluster.session_dir(), token) == []

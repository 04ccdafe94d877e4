"""hvrun.ray's pure parts, without Ray: the placement group's shape, ranks and GPU pinning, the
sealed job secret."""
import pytest

from hvrun.ray import placement
from hvrun.ray.secret_exchange import KeyPair


def test_bundles_per_worker_or_per_host():
    assert placement.bundles(3, None, 1, 2, 0) == ([{"CPU": 2}] * 3, "PACK", [0, 1, 2])
    assert placement.bundles(None, 2, 3, 1, 1) == (
        [{"CPU": 3, "GPU": 3}] * 2, "STRICT_SPREAD", [0, 0, 0, 1, 1, 1])


def test_ranks_go_host_by_host_and_local_ranks_follow_the_gpus():
    slots = [placement.Slot(0, "10.0.0.2", "b" * 20, 11, ["3"]),
             placement.Slot(1, "10.0.0.1", "a" * 20, 12, ["1"]),
             placement.Slot(2, "10.0.0.2", "b" * 20, 13, ["2"]),
             placement.Slot(3, "10.0.0.1", "a" * 20, 14, ["0"])]
    ordered = placement.assign_ranks(slots)
    assert [(s.index, s.rank, s.local_rank) for s in ordered] == [
        (2, 0, 0), (0, 1, 1), (3, 2, 0), (1, 3, 1)]
    # Local rank k's own GPU is visible device k on its host.
    for s in ordered:
        assert s.visible_gpus.split(",")[s.local_rank] == s.gpu_ids[0]
    assert ordered[0].visible_gpus == "2,3" and ordered[2].visible_gpus == "0,1"
    assert "rank 0 on host 10.0.0.2" in ordered[0].describe()


def test_ray_nodes_sharing_an_address_are_hosts_of_their_own():
    slots = [placement.Slot(i, "10.0.0.1", node, i, []) for i, node in
             enumerate(["a" * 20, "b" * 20, "a" * 20])]
    ordered = placement.assign_ranks(slots)
    assert [(s.index, s.host, s.local_rank) for s in ordered] == [
        (0, "10.0.0.1/node-aaaaaaaa", 0), (2, "10.0.0.1/node-aaaaaaaa", 1),
        (1, "10.0.0.1/node-bbbbbbbb", 0)]


def test_several_gpus_a_worker_keep_each_first_gpu_at_its_local_rank():
    slots = [placement.Slot(0, "h", "n", 1, [2, 3]), placement.Slot(1, "h", "n", 2, [0, 1])]
    ordered = placement.assign_ranks(slots)
    assert [s.index for s in ordered] == [1, 0]
    assert ordered[0].visible_gpus == "0,2,1,3"


def test_cpu_workers_leave_cuda_visible_devices_alone():
    ordered = placement.assign_ranks([placement.Slot(0, "h", "n", 1, [])])
    assert ordered[0].visible_gpus is None and ordered[0].local_rank == 0


def test_the_sealed_secret_opens_only_for_its_worker():
    worker, driver, stranger = KeyPair(), KeyPair(), KeyPair()
    sealed = driver.seal(worker.public, "s3cret-job")
    assert "s3cret-job".encode() not in repr(sealed).encode()
    assert worker.open(driver.public, sealed) == "s3cret-job"
    with pytest.raises(ValueError):
        stranger.open(driver.public, sealed)
    nonce, cipher, tag = sealed
    with pytest.raises(ValueError):  # a changed byte of the ciphertext is caught by its tag
        worker.open(driver.public, (nonce, bytes([cipher[0] ^ 1]) + cipher[1:], tag))


def test_worker_environment_is_a_ranks_with_its_gpus_and_interfaces():
    from hvrun.cluster import JobIdentity
    slot = placement.assign_ranks([placement.Slot(0, "10.0.0.1", "a" * 20, 5, ["1"]),
                                   placement.Slot(1, "10.0.0.1", "a" * 20, 6, ["0"])])[1]
    env = placement.worker_environment(slot, JobIdentity("job-1", "10.0.0.9:4000"), 45,
                                       {"eth1", "eth0"}, {"HVRUN_SECRET": "x", "MINE": "1"})
    assert env["HVRUN_RANK"] == "1" and env["HVRUN_LOCAL_RANK"] == "1"
    assert env["HVRUN_HOST"] == "10.0.0.1" and env["HVRUN_JOB_ID"] == "job-1"
    assert env["HVRUN_COORDINATOR_ADDR"] == "10.0.0.9:4000"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["GLOO_SOCKET_IFNAME"] == "eth0,eth1"
    assert env["HVRUN_START_TIMEOUT"] == "45" and env["MINE"] == "1"
    assert "HVRUN_SECRET" not in env

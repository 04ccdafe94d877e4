"""hvrun.tensorflow's host layout as Horovod reports it, under a job whose ranks claim two hosts
(HVRUN_HOST, see CMakeLists.txt): local_size is the ranks on this rank's host, and
is_homogeneous() whether every host runs as many."""
import collections
import os

import pytest

tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed")
import hvrun.tensorflow as hvd  # noqa: E402


def test_local_size_and_is_homogeneous_follow_the_hosts():
    hvd.init()
    hosts = hvd.allgather_object(os.environ["HVRUN_HOST"])
    per_host = collections.Counter(hosts)
    assert len(per_host) == 2
    assert hvd.local_size() == per_host[os.environ["HVRUN_HOST"]]
    assert hvd.is_homogeneous() == (len(set(per_host.values())) == 1)
    assert hvd.is_homogeneous() == (hvd.size() % 2 == 0)
    hvd.shutdown()

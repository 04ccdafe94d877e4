"""Host layout as Horovod reports it: local_size is the number of ranks on this rank's host and
is_homogeneous() says whether every host runs as many. Run under jobs whose ranks claim
different hosts (HVRUN_HOST, see CMakeLists.txt), homogeneous and not."""
import collections
import os

import hvrun.torch as hvd


def test_local_size_and_is_homogeneous_follow_the_hosts():
    hosts = hvd.allgather_object(os.environ["HVRUN_HOST"])
    per_host = collections.Counter(hosts)
    assert len(per_host) == 2  # the job spreads its ranks over two hosts
    assert hvd.local_size() == per_host[os.environ["HVRUN_HOST"]]
    assert hvd.is_homogeneous() == (len(set(per_host.values())) == 1)
    assert hvd.is_homogeneous() == (hvd.size() % 2 == 0)

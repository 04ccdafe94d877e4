"""A real Ray cluster on this machine for the Ray suites: a head and one more node (Ray's own
multi-node test cluster, each node its own raylet and processes), small and bounded: 2 CPUs and
2 (logical) GPUs per node, 80 MiB object stores, no dashboard, its files in a fresh RAY_TMPDIR.
Started once per test module and shut down after it; the suites skip, saying why, where Ray
cannot start here."""
import os
import shutil
import tempfile

import pytest

NODE = dict(num_cpus=2, num_gpus=2, object_store_memory=80 * 2**20)


class RayTestCluster:
    def __init__(self):
        # Short: Ray's unix sockets live below it (at most 107 characters a path).
        self.tmp = tempfile.mkdtemp(prefix="hvray", dir="/tmp")
        os.environ["RAY_TMPDIR"] = self.tmp
        import ray
        from ray.cluster_utils import Cluster
        self.cluster = Cluster(initialize_head=True,
                               head_node_args=dict(NODE, include_dashboard=False))
        try:
            self.nodes = [self.cluster.head_node, self.cluster.add_node(**NODE)]
            ray.init(address=self.cluster.address, log_to_driver=True)
            self.cluster.wait_for_nodes()
        except BaseException:
            self.shutdown()
            raise

    def add_node(self):
        node = self.cluster.add_node(**NODE)
        self.cluster.wait_for_nodes()
        self.nodes.append(node)
        return node

    def remove_node(self, node):
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)

    def session_dir(self):
        import ray
        return ray._private.worker._global_node.get_session_dir_path()

    def shutdown(self):
        import ray
        ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster():
    try:
        import ray  # noqa: F401
    except ImportError as error:
        pytest.skip("Ray is not installed (%s): scripts/install-deps installs it" % error)
    try:
        cluster = RayTestCluster()
    except Exception as error:  # Ray could not start its processes here
        pytest.skip("a Ray cluster could not start on this machine: %s" % error)
    yield cluster
    cluster.shutdown()

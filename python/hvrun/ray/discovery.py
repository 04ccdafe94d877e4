"""Which hosts an elastic job on Ray may use: Ray's own cluster state (its alive nodes and their
resources), as Horovod's RayHostDiscovery reads it."""

def host_name(node_id):
    """The host name hvrun knows a Ray node by: never one of this machine's own names, so
    that hvrun's launcher starts every host's agent through Ray (agent_relay.py). Short, for
    hvrun's tables: 40 bits of the node id tell a cluster's nodes apart."""
    return "ray-" + node_id[:10]


class RayHostDiscovery:
    """Every alive Ray node with slots: its CPUs // cpus_per_slot (and, with use_gpu, its GPUs
    // gpus_per_slot). find_available_hosts_and_slots() -> {host: slots}."""

    def __init__(self, use_gpu=False, cpus_per_slot=1, gpus_per_slot=1):
        self.use_gpu = use_gpu
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = gpus_per_slot

    def find_available_hosts_and_slots(self):
        import ray
        hosts = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            slots = int(resources.get("CPU", 0) // self.cpus_per_slot) if self.cpus_per_slot \
                else None
            if self.use_gpu:
                gpu_slots = int(resources.get("GPU", 0) // self.gpus_per_slot)
                slots = gpu_slots if slots is None else min(slots, gpu_slots)
            if slots:
                hosts[host_name(node["NodeID"])] = slots
        return hosts


def node_of_host(host):
    """The id of the alive Ray node `host` names (a host_name, or a node's address), or None."""
    import ray
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        if host == host_name(node["NodeID"]) or host == node.get("NodeManagerAddress"):
            return node["NodeID"]
    return None

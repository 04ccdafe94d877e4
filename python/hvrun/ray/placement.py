"""Where the workers go: the placement group's bundles, and each worker's rank, local rank,
visible GPUs and environment once Ray has placed them. Pure functions (no Ray calls, but
`describe_this_worker`, which a worker runs), so they are tested alone."""
import os

from hvrun.cluster import plan_ranks, rank_environment


def bundles(num_workers, num_hosts, num_workers_per_host, cpus_per_worker, gpus_per_worker):
    """(bundles, strategy, bundle index of each worker).

    num_workers: one bundle per worker, packed onto as few nodes as Ray can.
    num_hosts: one bundle per host holding all its workers, on distinct nodes (STRICT_SPREAD),
    so that every host runs num_workers_per_host workers."""
    def shape(count):
        resources = {"CPU": cpus_per_worker * count}
        if gpus_per_worker:
            resources["GPU"] = gpus_per_worker * count
        return resources
    if num_hosts is not None:
        return ([shape(num_workers_per_host) for _ in range(num_hosts)], "STRICT_SPREAD",
                [i // num_workers_per_host for i in range(num_hosts * num_workers_per_host)])
    return [shape(1) for _ in range(num_workers)], "PACK", list(range(num_workers))


class Slot:
    """A placed worker: what it reported, and its place in the job (`rank_slot`, a
    hvrun.cluster.RankSlot) once assign_ranks numbered it."""

    def __init__(self, index, address, node_id, pid, gpu_ids):
        self.index = index            # the order the actor was created in
        self.address = address        # the Ray node's IP address
        self.node_id = node_id
        self.pid = pid
        self.gpu_ids = [str(g) for g in gpu_ids]
        self.host = address           # the host hvrun knows it by (HVRUN_HOST), see assign_ranks
        self.rank_slot = None
        self.public_key = None        # the worker's, for the sealed job secret
        self.visible_gpus = None      # CUDA_VISIBLE_DEVICES, or None to leave Ray's

    @property
    def rank(self):
        return self.rank_slot.rank

    @property
    def local_rank(self):
        return self.rank_slot.local_rank

    def describe(self):
        return "rank %s on host %s (Ray node %s, pid %s)" % (
            self.rank, self.host, self.node_id[:12], self.pid)


def describe_this_worker(public_key):
    """What a worker reports for its placement: (node address, Ray node id, pid, GPU ids, its
    public key); run in the worker."""
    import ray
    return (ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id(),
            os.getpid(), list(ray.get_gpu_ids()), public_key)


def slots_from(descriptions):
    """A Slot per describe_this_worker() answer, in worker order."""
    slots = []
    for index, (address, node_id, pid, gpu_ids, public) in enumerate(descriptions):
        slot = Slot(index, address, node_id, pid, gpu_ids)
        slot.public_key = public
        slots.append(slot)
    return slots


def worker_environment(slot, identity, timeout_s, nics=None, user_env=None):
    """The variables of the worker in `slot` (placed by assign_ranks) for the job `identity`
    (hvrun.cluster.JobIdentity): a rank's, its GPUs, the data plane's interfaces."""
    env = rank_environment(slot.rank_slot, identity, user_env=user_env)
    env["HVRUN_START_TIMEOUT"] = str(timeout_s)
    if slot.visible_gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot.visible_gpus
    if nics:
        env["GLOO_SOCKET_IFNAME"] = ",".join(sorted(nics))
    return env


def assign_ranks(slots):
    """Numbers the slots, in place, and returns them in rank order.

    A host is a Ray node (its GPU ids are that node's), named by the node's address, with the
    node's id added where several Ray nodes of the job share one address. Ranks go host by host
    (hosts in the order their first worker was created), as hvrun.cluster.plan_ranks numbers
    them. Within a host, local ranks follow the GPU each worker was given, and every worker of
    the host sees the host's GPUs in local-rank order: local rank k's GPU is visible device k,
    which is the one hvrun pins local rank k to."""
    nodes = list(dict.fromkeys(s.node_id for s in slots))
    nodes_at = {}
    for slot in slots:
        nodes_at.setdefault(slot.address, set()).add(slot.node_id)
    ordered = []
    for node in nodes:
        mine = [s for s in slots if s.node_id == node]
        for s in mine:
            s.host = s.address if len(nodes_at[s.address]) == 1 else "%s/node-%s" % (
                s.address, node[:8])
        if all(s.gpu_ids for s in mine):
            mine.sort(key=lambda s: (_gpu_key(s.gpu_ids[0]), s.index))
            firsts = [s.gpu_ids[0] for s in mine]
            rest = [g for s in mine for g in s.gpu_ids[1:]]
            for s in mine:
                s.visible_gpus = ",".join(firsts + rest)
        ordered += mine
    for s, rank_slot in zip(ordered, plan_ranks([s.host for s in ordered])):
        s.rank_slot = rank_slot
    return ordered


def _gpu_key(gpu_id):
    return (0, int(gpu_id), "") if gpu_id.isdigit() else (1, 0, gpu_id)

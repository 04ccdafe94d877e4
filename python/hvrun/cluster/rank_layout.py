"""Which rank each task of a cluster engine becomes, from the hosts its tasks run on.

Ranks are numbered host by host (the hosts in the order their first task appears, tasks in
order within a host), as hvrun's launcher numbers a -H list: the ranks of a host are
contiguous, local rank k is the k-th task on its host, cross rank the host's index. Every task
computes the same layout from the same list, so the driver and the ranks agree without talking.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class RankSlot:
    rank: int
    host: str
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    size: int


def plan_ranks(task_hosts):
    """`task_hosts[i]`: the host task i runs on. Returns the RankSlot of each task, by task index."""
    if not task_hosts:
        raise ValueError("no tasks to give ranks to")
    hosts = list(dict.fromkeys(task_hosts))  # order of first appearance
    tasks_by_host = {host: [i for i, h in enumerate(task_hosts) if h == host] for host in hosts}
    slots = [None] * len(task_hosts)
    rank = 0
    for cross_rank, host in enumerate(hosts):
        tasks = tasks_by_host[host]
        for local_rank, task in enumerate(tasks):
            slots[task] = RankSlot(rank, host, local_rank, len(tasks), cross_rank, len(hosts),
                                   len(task_hosts))
            rank += 1
    return slots

"""The variables a rank started by a cluster engine gets: the same as hvrun's launcher gives its
workers (docs/launcher.md, "Environment of each rank"; launcher/plan/rank_environment.cc), less
the secret, which only `rank_process.run_rank` puts in the trainer's own environment."""
from dataclasses import dataclass


@dataclass(frozen=True)
class JobIdentity:
    """What every rank of the job shares (the secret travels apart)."""
    job_id: str
    coordinator_address: str  # "10.0.0.1:40123"


def rank_environment(slot, job, data_address=None, user_env=None):
    """The variables to add to the rank's inherited environment. `data_address`: where the
    rank's data plane (Gloo) binds; None leaves it to the worker library (GLOO_SOCKET_IFNAME,
    HOROVOD_GLOO_IFACE). `user_env` (the caller's `env=`) wins over nothing hvrun needs: the
    job's identity and the rank's place are set last."""
    env = dict(user_env or {})
    env.pop("HVRUN_SECRET", None)
    rank_numbers = {
        "RANK": slot.rank, "SIZE": slot.size, "LOCAL_RANK": slot.local_rank,
        "LOCAL_SIZE": slot.local_size, "CROSS_RANK": slot.cross_rank,
        "CROSS_SIZE": slot.cross_size,
    }
    for name, value in rank_numbers.items():
        env["HVRUN_" + name] = str(value)
        env["HOROVOD_" + name] = str(value)
    # torchrun's names, for trainers ported from it.
    env["RANK"] = str(slot.rank)
    env["WORLD_SIZE"] = str(slot.size)
    env["LOCAL_RANK"] = str(slot.local_rank)
    env["LOCAL_WORLD_SIZE"] = str(slot.local_size)
    env["HVRUN_HOST"] = slot.host
    env["HVRUN_COORDINATOR_ADDR"] = job.coordinator_address
    env["HVRUN_JOB_ID"] = job.job_id
    if data_address:
        env["HVRUN_DATA_ADDR"] = data_address
    return env


def local_address_towards(address):
    """The address of this machine's interface that reaches `address` ("host:port"): where a
    rank's data plane should bind so that ranks on other hosts reach it the way this one reaches
    the coordinator. No packet is sent (a UDP socket's connect only picks the route)."""
    import socket
    host, _, port = address.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host.strip("[]"), int(port)))
        return probe.getsockname()[0]

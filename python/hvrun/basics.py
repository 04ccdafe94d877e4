"""Horovod's process and build queries (horovod.common.basics), shared by hvrun.torch and
hvrun.tensorflow."""
from hvrun import _core, _state


def is_initialized():
    return _state.is_initialized()


def size():
    return _state.worker().size


def rank():
    return _state.worker().rank


def local_size():
    return _state.worker().local_size


def local_rank():
    return _state.worker().local_rank


def cross_size():
    return _state.worker().cross_size


def cross_rank():
    return _state.worker().cross_rank


_homogeneous = True


def placement_local_sizes(worker):
    """Every rank's local size (its host's rank count), from the hosts the coordinator placed
    the ranks on: no collective. None where the coordinator did not say."""
    hosts = list(worker.rank_hosts)
    if len(hosts) != worker.size:
        return None
    counts = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + 1
    return [counts[host] for host in hosts]


def set_layout(local_sizes):
    """init(): every rank's local size (its host's rank count), gathered; is_homogeneous() says
    whether every host runs as many ranks, as Horovod's does from its init."""
    global _homogeneous
    _homogeneous = len(set(int(s) for s in local_sizes)) == 1


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    _state.worker()
    return _homogeneous


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False  # the data planes are Gloo (CPU) and NCCL (CUDA); MPI only launches


def gloo_enabled():
    return True


def gloo_built():
    return True


def nccl_built():
    """NCCL's version code (e.g. 21805) when this build has the CUDA data plane, else 0."""
    return _core.nccl_version_code()


def cuda_built():
    return bool(_core.cuda_built())


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Horovod's hvd.start_timeline: the coordinator writes the job's timeline to file_path."""
    import hvrun
    hvrun.start_timeline(file_path, mark_cycles)


def stop_timeline():
    import hvrun
    hvrun.stop_timeline()


def mark_step():
    """One training step done on this rank (hvrun's step rate; not in Horovod)."""
    _state.worker().mark_step()


def mark_phase(name):
    """Phase `name` of this step starts now on this rank ("data", "forward", "backward", ...),
    ending the one before; "" ends it, and mark_step() ends the last. When one rank holds the
    others back, hvrun says which of its phases grew (not in Horovod)."""
    _state.worker().mark_phase(str(name))


__all__ = [
    "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "is_homogeneous", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled",
    "gloo_built", "nccl_built", "cuda_built", "rocm_built", "ddl_built", "ccl_built",
    "start_timeline", "stop_timeline", "mark_step", "mark_phase",
]

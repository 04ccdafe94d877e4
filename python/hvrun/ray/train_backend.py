"""A Ray Train backend for hvrun: Ray Train's workers become an hvrun job's ranks.

    from ray.train import ScalingConfig
    from ray.train.data_parallel_trainer import DataParallelTrainer
    from hvrun.ray.train_backend import HvrunConfig

    trainer = DataParallelTrainer(train_loop, backend_config=HvrunConfig(),
                                  scaling_config=ScalingConfig(num_workers=4))
    trainer.fit()            # train_loop calls hvd.init() and trains with hvrun.torch

Built on Ray's backend interface (ray.train.backend.Backend and BackendConfig), which runs
on_start before the training loop and on_shutdown after it, over a worker group with
execute/execute_single. on_start does what RayExecutor.start does: ranks node by node with each
node's GPUs in local-rank order (placement.py), the coordinator started where Ray Train runs
the backend (the trainer's controller), every worker given its rank's variables and the job
secret sealed for its key (secret_exchange.py)."""
import os
import secrets
from dataclasses import dataclass
from typing import Optional, Set

from ray.train.backend import Backend, BackendConfig

from hvrun.cluster import CoordinatorDaemon, JobIdentity, JobSecret
from hvrun.ray import placement
from hvrun.ray.secret_exchange import KeyPair

# The key pair of this Train worker process (one per process: a worker is one rank).
_worker_key = []


@dataclass
class HvrunConfig(BackendConfig):
    """timeout_s: the rendezvous deadline (hvrun's --start-timeout); nics: the interfaces the
    ranks' data plane may use (GLOO_SOCKET_IFNAME)."""
    timeout_s: int = 300
    nics: Optional[Set[str]] = None

    @property
    def backend_cls(self):
        return _HvrunBackend


class _HvrunBackend(Backend):
    def on_start(self, worker_group, backend_config):
        import ray
        ordered = placement.assign_ranks(placement.slots_from(worker_group.execute(_describe)))
        secret = JobSecret()
        job_id = "ray-train-" + secrets.token_hex(6)
        self._coordinator = CoordinatorDaemon.start(
            len(ordered), secret, job_id, listen="%s:0" % ray.util.get_node_ip_address(),
            start_timeout=backend_config.timeout_s)
        identity = JobIdentity(job_id, self._coordinator.address)
        driver_key = KeyPair()
        for slot in ordered:
            env = placement.worker_environment(slot, identity, backend_config.timeout_s,
                                               backend_config.nics)
            worker_group.execute_single(slot.index, _join, env, driver_key.public,
                                        driver_key.seal(slot.public_key, secret.reveal()))

    def on_shutdown(self, worker_group, backend_config):
        coordinator = getattr(self, "_coordinator", None)
        if coordinator is not None:
            coordinator.stop()
            self._coordinator = None


def _describe():
    _worker_key[:] = [KeyPair()]
    return placement.describe_this_worker(_worker_key[0].public)


def _join(env, driver_public, sealed_secret):
    os.environ.update(env)
    os.environ["HVRUN_SECRET"] = _worker_key[0].open(driver_public, sealed_secret)

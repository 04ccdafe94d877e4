"""The worker actor: one per slot, a process Ray starts on the node the placement group chose.

The driver makes it one of the job's ranks by giving it the job secret sealed for its key
(secret_exchange.py) and its environment (HVRUN_RANK, ...); the function it runs then calls
hvrun's init() as under hvrun."""
import os
import socket

from hvrun.ray import placement
from hvrun.ray.secret_exchange import KeyPair


class BaseHorovodWorker:
    """What every worker actor is: Horovod's class of the same name, with the same methods."""

    executable = None

    def __init__(self, world_rank=0, world_size=1):
        self._key = KeyPair()
        self.world_rank = world_rank
        self.world_size = world_size

    def describe(self):
        """(host address, Ray node id, pid, GPU ids, public key) for the driver's placement."""
        return placement.describe_this_worker(self._key.public)

    def hostname(self):
        return socket.gethostname()

    def node_id(self):
        import ray
        return ray.get_runtime_context().get_node_id()

    def get_gpu_ids(self):
        import ray
        return list(ray.get_gpu_ids())

    def take_secret(self, driver_public, sealed_secret):
        """The job secret, opened with this worker's key, into this process's environment."""
        os.environ["HVRUN_SECRET"] = self._key.open(driver_public, sealed_secret)

    def update_env_vars(self, env_vars):
        os.environ.update({k: str(v) for k, v in env_vars.items()})
        if "HVRUN_RANK" in env_vars:
            self.world_rank = int(env_vars["HVRUN_RANK"])

    def env_vars(self):
        """This worker's environment, the job secret left out."""
        return {k: v for k, v in os.environ.items() if k != "HVRUN_SECRET"}

    def start_executable(self, executable_cls=None, executable_args=None, executable_kwargs=None):
        if executable_cls is not None:
            self.executable = executable_cls(*(executable_args or []),
                                             **(executable_kwargs or {}))

    def execute(self, func):
        """func(executable), as Horovod's execute."""
        return func(self.executable)

    def run(self, fn, args, kwargs):
        return fn(*(args or []), **(kwargs or {}))

    def hvrun_initialized(self):
        import sys
        basics = sys.modules.get("hvrun.basics")
        return bool(basics and basics.is_initialized())

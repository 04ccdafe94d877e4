"""hvrun on Ray: Horovod's horovod.ray API (docs/ray.md)."""
from hvrun.ray.failures import WorkerFailedError
from hvrun.ray.runner import RayExecutor
from hvrun.ray.worker import BaseHorovodWorker

__all__ = ["RayExecutor", "BaseHorovodWorker", "WorkerFailedError"]

"""hvrun on Ray: Horovod's horovod.ray API (docs/ray.md)."""
from hvrun.cluster import JobFailed
from hvrun.ray.runner import RayExecutor
from hvrun.ray.worker import BaseHorovodWorker

__all__ = ["RayExecutor", "BaseHorovodWorker", "JobFailed"]

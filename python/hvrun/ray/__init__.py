"""hvrun on Ray: Horovod's horovod.ray API (docs/ray.md)."""
from hvrun.cluster import JobFailed
from hvrun.ray.discovery import RayHostDiscovery
from hvrun.ray.elastic import ElasticJobFailed, ElasticRayExecutor
from hvrun.ray.runner import RayExecutor
from hvrun.ray.worker import BaseHorovodWorker

__all__ = ["RayExecutor", "ElasticRayExecutor", "BaseHorovodWorker", "RayHostDiscovery",
           "JobFailed", "ElasticJobFailed"]

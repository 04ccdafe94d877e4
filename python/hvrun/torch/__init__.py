"""Horovod's PyTorch API on hvrun: `import hvrun.torch as hvd` in a horovod.torch script.

    import hvrun.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Run it with `hvrun -np N python3 train.py`.
"""
from hvrun.exceptions import HorovodInternalError, HostsUpdatedInterrupt, TensorNameError
from hvrun.torch.basics import *  # noqa: F401,F403  (Horovod's queries: size, rank, *_built, ...)
from hvrun.torch.basics import __all__ as _basics_all
from hvrun.torch.checkpoint import Checkpoint
from hvrun.torch.compression import Compression
from hvrun.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                   broadcast_parameters)
from hvrun.torch.mpi_ops import *  # noqa: F401,F403  (Horovod's names, listed in mpi_ops.__all__)
from hvrun.torch.mpi_ops import __all__ as _ops_all
from hvrun.torch.optimizer import DistributedOptimizer
from hvrun.torch.sync_batch_norm import SyncBatchNorm
from hvrun.torch import elastic  # hvd.elastic.run, TorchState, ElasticSampler (Horovod's names)

__all__ = list(_basics_all) + list(_ops_all) + [
    "Checkpoint", "Compression", "DistributedOptimizer", "SyncBatchNorm", "HostsUpdatedInterrupt",
    "TensorNameError", "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
    "allgather_object"]

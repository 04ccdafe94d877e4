"""Model and optimizer state helpers, as horovod.torch.functions.

Objects travel pickled with cloudpickle, as in Horovod: lambdas, local classes and functions
defined in __main__ arrive as the sender defined them.
"""
import collections
import functools

import torch

from hvrun import _object_wire
from hvrun.torch.basics import rank
from hvrun.torch.handles import run_together
from hvrun.torch.mpi_ops import (allgather, allgather_async, broadcast_async_, global_process_set,
                                 synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every parameter with root_rank's, in place. `params`: a model's state_dict()
    or named_parameters() (a list of (name, tensor))."""
    run_together(functools.partial(broadcast_async_, t, root_rank, name, process_set=process_set)
                 for name, t in _parameter_tensors(params))


def _parameter_tensors(params):
    """(name, tensor to broadcast into) of a state_dict() or named_parameters()."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    return [(name, p.data if p.requires_grad else p) for name, p in params
            if isinstance(p, torch.Tensor)]


def _bytes_tensor(data):
    if not data:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (pickled there, unpickled on every other rank): one collective,
    an allgather to which only root_rank contributes."""
    name = name if name is not None else type(obj).__name__
    is_root = rank() == root_rank
    data = allgather(_bytes_tensor(_object_wire.dumps(obj) if is_root else b""),
                     name=name + ".obj", process_set=process_set)
    if is_root:
        return obj
    return _object_wire.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order (one collective)."""
    name = name if name is not None else type(obj).__name__
    return _gathered_objects(synchronize(_start_allgather_object(obj, name, process_set)))


def _start_allgather_object(obj, name, process_set=global_process_set):
    """allgather_object's collective, started: its handle's result goes to _gathered_objects."""
    return allgather_async(_bytes_tensor(_object_wire.framed(obj)), name=name + ".obj",
                           process_set=process_set)


def _gathered_objects(result):
    return _object_wire.unframed(result.numpy().tobytes())


def _sparse_parameter_ids(model):
    """Parameters of the model's sparse embeddings (their gradients are sparse)."""
    ids = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                ids.update(id(p) for p in module.parameters())
    return ids


class _OptimizerSync:
    """One optimizer's state as broadcast_optimizer_state sends it: the per-parameter tensors
    (broadcast in place, in a deterministic order) and everything else as one object (`meta`)."""

    def __init__(self, optimizer, model=None):
        if isinstance(optimizer, torch.optim.LBFGS):
            raise ValueError("cannot broadcast torch.optim.LBFGS state")
        self.optimizer = optimizer
        state_dict = optimizer.state_dict()
        # A fresh optimizer has no per-parameter state yet: take one step with zero gradients so
        # every rank holds the tensors root's state will be broadcast into (what Horovod does).
        if len(state_dict["state"]) == 0:
            _step_on_zero_gradients(optimizer, model)
            state_dict = optimizer.state_dict()
        self.state_dict = state_dict
        self.tensors, scalars = [], {}
        for pid in sorted(state_dict["state"]):
            for key in sorted(state_dict["state"][pid]):
                value = state_dict["state"][pid][key]
                # Sparse state (SGD's momentum of a sparse embedding) travels as an object.
                if isinstance(value, torch.Tensor) and value.layout == torch.strided:
                    self.tensors.append(("optimizer_state.%s.%s" % (pid, key), value))
                else:
                    scalars[(pid, key)] = value
        self.meta = {"param_groups": state_dict["param_groups"], "scalars": scalars,
                     "tensor_names": [n for n, _ in self.tensors]}

    def check(self, root_meta, root_rank):
        """Raises when root's state has other tensors than this rank's (their broadcasts would
        never match)."""
        if root_meta["tensor_names"] != self.meta["tensor_names"]:
            raise ValueError("optimizer state differs in structure between this rank and rank %d"
                             % root_rank)

    def load(self, root_meta):
        """Takes root's hyper-parameters and scalars; the tensors were broadcast in place."""
        state = collections.defaultdict(dict)
        for pid in self.state_dict["state"]:
            state[pid] = dict(self.state_dict["state"][pid])
        for (pid, key), value in root_meta["scalars"].items():
            state[pid][key] = value
        self.optimizer.load_state_dict({"state": dict(state),
                                        "param_groups": root_meta["param_groups"]})


def _step_on_zero_gradients(optimizer, model):
    sparse_ids = _sparse_parameter_ids(model)
    all_sparse = isinstance(optimizer, torch.optim.SparseAdam)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p.data)
                if all_sparse or (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse_ids):
                    p.grad = p.grad.to_sparse()
    step = optimizer.step
    if hasattr(optimizer, "_hvrun_local_step"):
        step = optimizer._hvrun_local_step  # DistributedOptimizer: no allreduce here
    step()


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (hyper-parameters and per-parameter tensors such as
    momentum buffers) equal to root_rank's. `model` names the parameters whose gradients are
    sparse (torch.nn.Embedding(sparse=True)), as in Horovod: a fresh optimizer's state is made by
    one step on zero gradients, sparse ones for those (and for every parameter of SparseAdam)."""
    sync = _OptimizerSync(optimizer, model)
    meta = broadcast_object(sync.meta, root_rank, name="optimizer_state.meta",
                            process_set=process_set)
    sync.check(meta, root_rank)
    run_together(functools.partial(broadcast_async_, t, root_rank, name=n, process_set=process_set)
                 for n, t in sync.tensors)
    sync.load(meta)


__all__ = ["broadcast_parameters", "broadcast_object", "allgather_object",
           "broadcast_optimizer_state"]

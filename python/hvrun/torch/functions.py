"""Model and optimizer state helpers, as horovod.torch.functions.

Objects travel pickled with cloudpickle, as in Horovod: lambdas, local classes and functions
defined in __main__ arrive as the sender defined them.
"""
import collections
import functools

import cloudpickle
import torch

from hvrun.torch.basics import rank
from hvrun.torch.handles import run_together
from hvrun.torch.mpi_ops import allgather, broadcast_, broadcast_async_, global_process_set


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every parameter with root_rank's, in place. `params`: a model's state_dict()
    or named_parameters() (a list of (name, tensor))."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    run_together(functools.partial(broadcast_async_, p.data if p.requires_grad else p, root_rank,
                                   name, process_set=process_set)
                 for name, p in params if isinstance(p, torch.Tensor))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (pickled there, unpickled on every other rank)."""
    name = name if name is not None else type(obj).__name__
    if rank() == root_rank:
        payload = cloudpickle.dumps(obj)
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, name + ".sz", process_set)
        broadcast_(data, root_rank, name + ".t", process_set)
        return obj
    length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name + ".sz", process_set)
    data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name + ".t", process_set)
    return cloudpickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order."""
    name = name if name is not None else type(obj).__name__
    payload = cloudpickle.dumps(obj)
    data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64), name=name + ".sz",
                        process_set=process_set)
    gathered = allgather(data, name=name + ".t", process_set=process_set).numpy().tobytes()
    objects, offset = [], 0
    for n in lengths.tolist():
        objects.append(cloudpickle.loads(gathered[offset:offset + n]))
        offset += n
    return objects


def _sparse_parameter_ids(model):
    """Parameters of the model's sparse embeddings (their gradients are sparse)."""
    ids = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                ids.update(id(p) for p in module.parameters())
    return ids


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (hyper-parameters and per-parameter tensors such as
    momentum buffers) equal to root_rank's. `model` names the parameters whose gradients are
    sparse (torch.nn.Embedding(sparse=True)), as in Horovod: a fresh optimizer's state is made by
    one step on zero gradients, sparse ones for those (and for every parameter of SparseAdam)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()
    # A fresh optimizer has no per-parameter state yet: take one step with zero gradients so
    # every rank holds the tensors root's state will be broadcast into (what Horovod does).
    if len(state_dict["state"]) == 0:
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
        state_dict = optimizer.state_dict()

    # Tensors travel in place, in a deterministic order; everything else as one object.
    tensors, scalars = [], {}
    for pid in sorted(state_dict["state"]):
        for key in sorted(state_dict["state"][pid]):
            value = state_dict["state"][pid][key]
            # Sparse state (SGD's momentum of a sparse embedding) travels as an object.
            if isinstance(value, torch.Tensor) and value.layout == torch.strided:
                tensors.append(("%s.%s" % (pid, key), value))
            else:
                scalars[(pid, key)] = value
    meta = broadcast_object({"param_groups": state_dict["param_groups"], "scalars": scalars,
                             "tensor_names": [n for n, _ in tensors]},
                            root_rank, name="optimizer_state.meta", process_set=process_set)
    if meta["tensor_names"] != [n for n, _ in tensors]:
        raise ValueError("optimizer state differs in structure between this rank and rank %d"
                         % root_rank)
    run_together(functools.partial(broadcast_async_, t, root_rank, name="optimizer_state." + n,
                                   process_set=process_set) for n, t in tensors)
    state = collections.defaultdict(dict)
    for pid in state_dict["state"]:
        state[pid] = dict(state_dict["state"][pid])
    for (pid, key), value in meta["scalars"].items():
        state[pid][key] = value
    optimizer.load_state_dict({"state": dict(state), "param_groups": meta["param_groups"]})


__all__ = ["broadcast_parameters", "broadcast_object", "allgather_object",
           "broadcast_optimizer_state"]

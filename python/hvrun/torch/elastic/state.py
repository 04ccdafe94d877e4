"""TorchState and ObjectState: training state that hvrun.torch.elastic.run keeps across resets."""
import copy

import torch

from hvrun import elastic as _elastic
from hvrun.torch.elastic.sampler import ElasticSampler
from hvrun.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                   broadcast_parameters)
from hvrun.torch.mpi_ops import Max, allreduce


def _any_rank(flag):
    total = allreduce(torch.tensor([1 if flag else 0], dtype=torch.int32),
                      name=_elastic.HOSTS_UPDATED_NAME, op=Max)
    return int(total[0]) != 0


def _cpu_copy(obj):
    """A deep copy in host memory: tensors cloned to the CPU (a saved copy must not share
    storage with what training keeps updating, nor hold GPU memory)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return obj.__class__((k, _cpu_copy(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_cpu_copy(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_cpu_copy(v) for v in obj)
    return copy.deepcopy(obj)


class _Handler:
    """How TorchState saves, restores and syncs one attribute of a kind it knows."""

    def __init__(self, name, value):
        self.name = name
        self.value = value
        self.save()

    def set_value(self, value):
        self.value = value
        self.save()

    def reset(self):
        pass


class _ModelHandler(_Handler):
    def save(self):
        self._saved = _cpu_copy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)  # copies into the parameters, in place

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def save(self):
        self._saved = _cpu_copy(self.value.state_dict())

    def restore(self):
        # torch's load_state_dict may keep the tensors it is given (CPU ones of the right
        # dtype): hand it a copy, so that later steps cannot change what was saved.
        self.value.load_state_dict(_cpu_copy(self._saved))

    def sync(self):
        # A rank whose optimizer has no state yet (one that just joined) takes a step on zero
        # gradients inside broadcast_optimizer_state to create it; with weight decay that step
        # moves the parameters. Put them back: the model's own sync decides their values.
        params = [p for group in self.value.param_groups for p in group["params"]]
        before = None
        if not self.value.state:
            before = [p.detach().clone() for p in params]
        broadcast_optimizer_state(self.value, root_rank=0)
        if before is not None:
            with torch.no_grad():
                for p, b in zip(params, before):
                    p.copy_(b)

    def reset(self):
        # hvrun.torch.DistributedOptimizer keeps the handles of allreduces it started; those of
        # the old membership can never complete. load_state_dict forgets them.
        if getattr(self.value, "_handles", None):
            self.value.load_state_dict(_cpu_copy(self.value.state_dict()))


class _SamplerHandler(_Handler):
    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self):
        # Each rank recorded only what it processed itself: the epoch's processed set is the
        # union over the ranks that are in rank 0's epoch (a rank that just joined may still be
        # at another epoch, with nothing processed that counts).
        states = allgather_object(self.value.state_dict(),
                                  name="hvrun.elastic.sampler." + self.name)
        epoch = states[0]["epoch"]
        processed = set()
        for s in states:
            if s["epoch"] == epoch:
                processed.update(s["processed_indices"])
        self.value.load_state_dict({"epoch": epoch, "processed_indices": processed})

    def reset(self):
        self.value.reset()


def _handler_for(name, value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(name, value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(name, value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(name, value)
    return None


class ObjectState(_elastic.ObjectState):
    """Plain attributes kept across resets (see hvrun.elastic.ObjectState), synced with
    hvrun.torch's broadcast_object: hvd.elastic.ObjectState(epoch=0, batch=0)."""

    def __init__(self, **kwargs):
        super().__init__(bcast_object=broadcast_object, any_rank=_any_rank, **kwargs)


class TorchState(_elastic.ObjectState):
    """Horovod's TorchState: a model, an optimizer, ElasticSamplers and plain attributes.

        state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    Attributes are recognized by type, whatever their keyword: a torch.nn.Module (its
    state_dict), a torch.optim.Optimizer (its state_dict), an ElasticSampler (epoch and
    processed indices); any other value is a plain attribute (deep-copied, so it must pickle).
    save() (commit()) keeps a copy of each in host memory; restore() loads it back; sync()
    gives every rank rank 0's model parameters and buffers, optimizer state and plain
    attributes, merges the samplers' processed indices across ranks, then saves. After a reset
    the samplers split the remaining samples among the new ranks. Assigning state.model = m
    (or any held attribute) makes the state keep m instead."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        object.__setattr__(self, "_handlers", {})
        values = dict(model=model, optimizer=optimizer)
        values.update(kwargs)
        plain = {}
        for name, value in values.items():
            handler = _handler_for(name, value)
            if handler is None:
                plain[name] = value
            else:
                self._handlers[name] = handler
                object.__setattr__(self, name, value)
        super().__init__(bcast_object=broadcast_object, any_rank=_any_rank, **plain)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers")
        if handlers is not None and name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()  # the plain attributes, then save() of everything

    def reset(self):
        for handler in self._handlers.values():
            handler.reset()

"""TorchState and ObjectState: training state that hvrun.torch.elastic.run keeps across resets."""
import copy
import functools

import torch

from hvrun import elastic as _elastic
from hvrun.torch.basics import rank
from hvrun.torch.elastic.sampler import ElasticSampler
from hvrun.torch.functions import (_gathered_objects, _OptimizerSync, _parameter_tensors,
                                   _start_allgather_object, broadcast_object)
from hvrun.torch.handles import run_together
from hvrun.torch.mpi_ops import Max, allreduce, broadcast_async_

# The collective of TorchState.sync that carries every object (each rank's part).
_SYNC_OBJECTS_NAME = "hvrun.elastic.torch_state"
# Where rank 0's part holds the plain attributes (never an attribute's name).
_PLAIN = "<plain attributes>"


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
    """How TorchState saves, restores and syncs one attribute of a kind it knows.

    A sync takes one or two rounds of collectives for the whole state, whatever it holds.
    First, together: an allgather of one object per rank (each handler's sync_object(), under
    its name) and rank 0's tensors that need nothing of it, broadcast in place (each handler's
    sync_tensors()). Then, when there are any, the tensors that depend on rank 0's object
    (checked_sync_tensors(parts), parts being every rank's object in rank order: an optimizer's,
    once this rank knows it holds the same ones as rank 0). finish_sync(parts) then applies
    what came."""

    def __init__(self, name, value):
        self.name = name
        self.value = value
        self.save()

    def set_value(self, value):
        self.value = value
        self.save()

    def reset(self):
        pass

    def warm_up(self):
        pass

    def sync_object(self, is_root):
        return None

    def sync_tensors(self):
        return []

    def checked_sync_tensors(self, parts):
        return []

    def finish_sync(self, parts):
        pass


class _ModelHandler(_Handler):
    def save(self):
        self._saved = _cpu_copy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)  # copies into the parameters, in place

    def sync_tensors(self):
        return [("%s.%s" % (self.name, n), t) for n, t in _parameter_tensors(self.value.state_dict())]


class _OptimizerHandler(_Handler):
    def save(self):
        self._saved = _cpu_copy(self.value.state_dict())

    def restore(self):
        # torch's load_state_dict may keep the tensors it is given (CPU ones of the right
        # dtype): hand it a copy, so that later steps cannot change what was saved.
        self.value.load_state_dict(_cpu_copy(self._saved))

    def _sync_keeping_parameters(self):
        # A rank whose optimizer has no state yet (one that just joined) takes a step on zero
        # gradients to create it (_OptimizerSync); with weight decay that step moves the
        # parameters. Put them back: the model's own sync decides their values.
        params = [p for group in self.value.param_groups for p in group["params"]]
        before = None
        if not self.value.state:
            before = [p.detach().clone() for p in params]
        sync = _OptimizerSync(self.value)
        if before is not None:
            with torch.no_grad():
                for p, b in zip(params, before):
                    p.copy_(b)
        return sync

    def warm_up(self):
        # A hot spare makes its optimizer's state (and runs the optimizer once) while the job
        # trains, not in the reset's sync with every rank waiting.
        if not self.value.state:
            self._sync_keeping_parameters()

    def sync_object(self, is_root):
        self._sync = self._sync_keeping_parameters()
        return self._sync.meta if is_root else None

    def checked_sync_tensors(self, parts):
        self._sync.check(parts[0][self.name], root_rank=0)
        return [("%s.%s" % (self.name, n), t) for n, t in self._sync.tensors]

    def finish_sync(self, parts):
        self._sync.load(parts[0][self.name])
        self._sync = None

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

    def sync_object(self, is_root):
        return self.value.state_dict()

    def finish_sync(self, parts):
        # Each rank recorded only what it processed itself: the epoch's processed set is the
        # union over the ranks that are in rank 0's epoch (a rank that just joined may still be
        # at another epoch, with nothing processed that counts).
        states = [part[self.name] for part in parts]
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
        # One or two rounds in all (see _Handler): a reset's recovery waits for each.
        is_root = rank() == 0
        part = {name: h.sync_object(is_root) for name, h in self._handlers.items()}
        if is_root and self._object_names:
            part[_PLAIN] = self._current_objects()
        first = [t for h in self._handlers.values() for t in h.sync_tensors()]
        gathered = run_together(
            [functools.partial(_start_allgather_object, part, _SYNC_OBJECTS_NAME)] +
            [functools.partial(broadcast_async_, t, 0, name) for name, t in first])[0]
        parts = _gathered_objects(gathered)
        then = [t for h in self._handlers.values() for t in h.checked_sync_tensors(parts)]
        if then:
            run_together(functools.partial(broadcast_async_, t, 0, name) for name, t in then)
        for handler in self._handlers.values():
            handler.finish_sync(parts)
        for name, value in parts[0].get(_PLAIN, {}).items():
            setattr(self, name, value)
        self.save()

    def reset(self):
        for handler in self._handlers.values():
            handler.reset()

    def warm_up(self):
        for handler in self._handlers.values():
            handler.warm_up()

"""Checkpoints for restarts (hvrun --max-restarts), on the worker library's Checkpointer.

    ckpt = hvd.Checkpoint(model.state_dict())   # tensors saved from and restored into, in place
    first = ckpt.restore() + 1                   # every rank calls it; -1 when there is none
    for step in range(first, steps):
        ...train...
        ckpt.save_if_due(step)                   # every rank calls it; rank 0 writes every
                                                 # --checkpoint-every steps, all see how it went

Rank 0 writes (data-parallel ranks hold the same state) to a temporary name, fsyncs, renames;
restore() takes the newest complete checkpoint that matches this run (its name, world size and
tensors), loads it on rank 0 and broadcasts it. Directory, cadence, how many to keep and the
run's name default to hvrun's --checkpoint-dir/-every/-keep/-name.
"""
import torch

from hvrun import _state
from hvrun._core import Checkpointer
from hvrun.exceptions import raise_for_status


class Checkpoint:
    """The tensors to checkpoint: a dict (e.g. a state_dict()) or a list of (name, tensor)."""

    def __init__(self, tensors, directory=None, every=None, keep=None, name=None):
        items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
        self._core = Checkpointer(_state.worker(), directory, every, keep, name)
        self._entries = []  # (tensor, host copy): the host copy is the tensor itself when it can be
        for key, tensor in items:
            if not isinstance(tensor, torch.Tensor):
                raise TypeError("Checkpoint: %r is a %s, not a torch.Tensor" % (key, type(tensor).__name__))
            tensor = tensor.detach()
            in_place = tensor.device.type == "cpu" and tensor.is_contiguous()
            host = tensor if in_place else torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
            code, message = self._core.add(str(key), host.data_ptr(), host.numel() * host.element_size())
            raise_for_status(code, message, "Checkpoint")
            self._entries.append((tensor, host))

    @property
    def enabled(self):
        """False when no directory is set: save and restore then do nothing."""
        return self._core.enabled

    def save(self, step):
        """Every rank calls it (as restore): rank 0 writes the checkpoint of `step` now and
        tells the others how that went. Returns the path rank 0 wrote, on every rank (None when
        checkpoints are off); when rank 0's write failed, raises HvrunError on every rank, with
        rank 0's message: a rank never takes a failed save for a good one."""
        if not self.enabled:
            return None
        for tensor, host in self._entries:
            if host is not tensor:
                host.copy_(tensor)
        path, code, message = self._core.save(int(step), False)
        if _state.worker().size > 1:
            from hvrun.torch.functions import broadcast_object
            path, code, message = broadcast_object(
                (path, code, message), root_rank=0, name="hvrun.checkpoint.save.%d" % int(step))
            if code != 0 and _state.worker().rank != 0:
                message = "rank 0 could not write the checkpoint of step %d: %s" % (int(step),
                                                                                     message)
        raise_for_status(code, message, "Checkpoint.save")
        return path or None

    def save_if_due(self, step):
        """save(step) when --checkpoint-every (or `every`) divides `step`; None otherwise.
        Every rank calls it with the same steps."""
        every = self._core.every
        if not self.enabled or every <= 0 or int(step) % every != 0:
            return None
        return self.save(step)

    def restore(self):
        """Every rank: loads the newest good checkpoint into the tensors; its step, or -1."""
        step, code, message = self._core.restore()
        raise_for_status(code, message, "Checkpoint.restore")
        if step >= 0:
            for tensor, host in self._entries:
                if host is not tensor:
                    tensor.copy_(host)
        return step

"""DistributedOptimizer, as horovod.torch.optimizer: allreduces gradients while backward runs.

A hook on each parameter's gradient accumulator starts an asynchronous allreduce as soon as that
gradient is ready (after `backward_passes_per_step` accumulations), so communication overlaps
the rest of backward; step() (or synchronize()) waits for them and writes the averaged
gradients back before the wrapped optimizer's own step.
"""
import contextlib
import warnings

import torch

from hvrun.torch.compression import Compression
from hvrun.torch.basics import size
from hvrun.torch.mpi_ops import Adasum, Average, allreduce_async_, global_process_set, synchronize


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%s.%s" % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [k for k, _ in named_parameters]
        duplicates = sorted({k for k in names if names.count(k) > 1})
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(duplicates))
        all_ids = {id(v) for group in self.param_groups for v in group["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        if all_ids - named_ids:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: %s"
                             % ", ".join(str(i) for i in sorted(all_ids - named_ids)))

        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._groups = groups  # accepted for compatibility; hvrun's coordinator fuses anyway
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if size() > 1:
            self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The gradient accumulator of p: its hook runs once p.grad holds this
                    # backward pass's gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # A parameter this rank did not use this step still takes part (others wait for it).
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                raise NotImplementedError("hvrun: sparse gradients need sparse_as_dense=True")
            tensor = tensor.to_dense()
            p.grad = tensor
        compressed, ctx = self._compression.compress(tensor)
        prescale, postscale = 1.0, 1.0
        if self.op == Average:
            # Split the average over the two factors; the library divides by size for Average.
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those not started yet)."""
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            output = synchronize(handle)
            self._allreduce_delay[p] = self.backward_passes_per_step
            if output is not p.grad:
                p.grad.copy_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For a step() right after an explicit synchronize() (e.g. gradient clipping)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without a loss.backward() call after "
                              "optimizer.synchronize(); use `with optimizer.skip_synchronize():` "
                              "after synchronize() to avoid allreducing the gradients twice.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def _hvrun_local_step(self, closure=None):
        """The wrapped optimizer's step alone (broadcast_optimizer_state's zero step)."""
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (or reduced by `op`) over
    every rank. Arguments as horovod.torch.DistributedOptimizer; `num_groups`/`groups` are
    accepted and have no effect (the coordinator fuses ready gradients by itself)."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)


__all__ = ["DistributedOptimizer"]

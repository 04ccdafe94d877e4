"""DistributedOptimizer, as horovod.torch.optimizer: allreduces gradients while backward runs.

A hook on each parameter's gradient accumulator starts an asynchronous allreduce as soon as that
gradient is ready (after `backward_passes_per_step` accumulations), so communication overlaps
the rest of backward; step() (or synchronize()) waits for them and writes the averaged
gradients back before the wrapped optimizer's own step. With `groups`, the gradients of one
group go as one grouped allreduce once the last of them is ready. Sparse gradients are reduced
by allgathering their indices and values (sparse_allreduce_async), or densified with
`sparse_as_dense=True`.
"""
import contextlib
import warnings

import torch

from hvrun import _state
from hvrun.elastic import is_elastic
from hvrun.torch.compression import Compression
from hvrun.torch.basics import size
from hvrun.torch.functions import broadcast_object
from hvrun.torch.handles import settle, synchronize_all
from hvrun.torch.mpi_ops import (Adasum, Average, allreduce_async_, global_process_set,
                                 grouped_allreduce_async_, sparse_allreduce_async)


def _split_list(items, n):
    """`items` in n contiguous chunks whose lengths differ by at most one (first ones longer)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _check_groups(groups):
    if groups is None:
        return
    if not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "torch.Tensor.")
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor.")
                if id(p) in seen:
                    raise ValueError("A parameter can only appear once in groups.")
                seen.add(id(p))


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
        _check_groups(groups)
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        # An elastic job that starts on one rank may grow: its hooks must be there already.
        # A rank outside the process set reduces nothing (Horovod's rule): no hooks, and
        # synchronize() is a no-op, so step() applies this rank's own gradients.
        if self.process_set.included() and (size() > 1 or is_elastic()):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _form_groups(self):
        """Parameter groups, in the order of the set's first rank (every rank forms the same)."""
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        root = 0 if self.process_set.process_set_id == 0 else self.process_set.ranks[0]
        order = [self._parameter_names.get(p) for p in params]
        # A parked hot spare takes part in no collective: its own order (the same model code
        # lists its parameters as the ranks' did).
        if not _state.is_parked_spare():
            order = broadcast_object(order, root_rank=root, name="DistributedOptimizer.groups",
                                     process_set=self.process_set)
        params.sort(key=lambda p: order.index(self._parameter_names.get(p)))
        if isinstance(self._groups, list):
            known = {id(p) for p in params}
            groups = [[p for p in g if id(p) in known] for g in self._groups]
            grouped = {id(p) for g in groups for p in g}
            groups += [[p] for p in params if id(p) not in grouped]
        else:
            groups = _split_list(params, self._groups)
        for group in (tuple(g) for g in groups if g):
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
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
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(tensor)
        prescale, postscale = self._scale_factors()
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _scale_factors(self):
        if self.op == Average:
            # Split the average over the two factors; Average itself divides by size.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _grouped_allreduce_grad_async(self, group):
        compressed = [self._compression.compress(p.grad) for p in group]
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_([c for c, _ in compressed],
                                          name=self._parameter_names.get(group[0]), op=self.op,
                                          prescale_factor=prescale, postscale_factor=postscale,
                                          process_set=self.process_set)
        return handle, [ctx for _, ctx in compressed]

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
                group = self._p_to_group.get(p)
                if group is not None:
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for member in group:
                            self._handles.pop(member, None)  # no-op entries of earlier passes
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those not started yet). On a rank
        outside the optimizer's process set, does nothing (Horovod's rule).

        When one allreduce fails, every other one is still waited for and this step's state is
        reset before the error is raised: the next step starts clean on every rank."""
        if not self.process_set.included():
            self._synchronized = True
            return
        try:
            try:
                self._start_missing()
            except BaseException:
                settle([h for h, _ in self._handles.values() if h is not None])
                raise
            self._wait_all()
        finally:
            self._handles.clear()
            for p in self._allreduce_delay:
                self._allreduce_delay[p] = self.backward_passes_per_step
            for group in self._group_counts:
                self._group_counts[group] = 0
        self._synchronized = True

    def _start_missing(self):
        started = set()
        for key in self._handles:
            started.update(key if isinstance(key, tuple) else (key,))
        for p in self._requires_update - started:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)

    def _wait_all(self):
        entries = list(self._handles.items())
        # A sparse gradient's handle is a callable returning the reduced tensor.
        outputs = synchronize_all([handle for _, (handle, _) in entries])
        for (key, (_, ctx)), output in zip(entries, outputs):
            if isinstance(key, tuple):
                for member, member_output, member_ctx in zip(key, output, ctx):
                    self._write_grad(member, self._compression.decompress(member_output,
                                                                          member_ctx))
            else:
                self._write_grad(key, self._compression.decompress(output, ctx))

    @staticmethod
    def _write_grad(p, reduced):
        if p.grad.is_sparse:
            if not reduced.is_sparse:
                reduced = reduced.to_sparse()  # sparse_as_dense: back to the gradient's layout
            p.grad.zero_().add_(reduced)  # sparse tensors have no set_
        elif reduced is not p.grad:
            p.grad.copy_(reduced)

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
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
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
    every rank. Arguments as horovod.torch.DistributedOptimizer: `groups` (a number of groups,
    or lists of parameters) sends each group's gradients as one grouped allreduce;
    `num_groups` is its deprecated spelling."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if op == Adasum:
        raise NotImplementedError("hvrun does not implement Adasum")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)


__all__ = ["DistributedOptimizer"]

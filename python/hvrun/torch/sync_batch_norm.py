"""hvd.SyncBatchNorm: batch normalization over the global batch (every rank's samples).

In training, each rank's per-channel count, mean and biased variance are allgathered and
combined (Chan's formula), so every rank normalizes with the statistics of the whole batch, and
the running statistics are those of the global batch (unbiased variance over all samples). The
backward pass allreduces the two per-channel sums the input gradient needs; the weight and bias
gradients stay local, as in Horovod (DistributedOptimizer averages them with the others).
Plain torch operations: CPU and CUDA tensors alike (Horovod's runs on CUDA only).
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from hvrun.torch.basics import size
from hvrun.torch.mpi_ops import Sum, allgather_async, allreduce_async, synchronize


def _channel_shape(x):
    return [1, x.size(1)] + [1] * (x.dim() - 2)


def _reduced_dims(x):
    return [0] + list(range(2, x.dim()))


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum):
        work_dtype = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
        x = input.contiguous().to(work_dtype)
        channels, dims = x.size(1), _reduced_dims(x)
        count = x.numel() // channels
        if count > 0:
            local_mean = x.mean(dims)
            local_var = x.var(dims, unbiased=False)
        else:  # no samples here: weight zero in the combination
            local_mean = x.new_zeros(channels)
            local_var = x.new_zeros(channels)
        stats = torch.cat([x.new_tensor([float(count)]), local_mean, local_var]).unsqueeze(0)
        gathered = synchronize(allgather_async(stats, name="sync_batch_norm.stats"))
        counts = gathered[:, :1]
        means = gathered[:, 1:1 + channels]
        variances = gathered[:, 1 + channels:]
        total = counts.sum()
        if total.item() < 2:
            raise ValueError("SyncBatchNorm: expected more than 1 value per channel over every "
                             "rank when training, got %d" % int(total.item()))
        mean = (counts * means).sum(0) / total
        var = (counts * (variances + (means - mean) ** 2)).sum(0) / total
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = var * (total / (total - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        shape = _channel_shape(x)
        xhat = (x - mean.view(shape)) * invstd.view(shape)
        out = xhat
        if weight is not None:
            out = out * weight.to(work_dtype).view(shape)
        if bias is not None:
            out = out + bias.to(work_dtype).view(shape)
        ctx.save_for_backward(xhat, weight, invstd, total)
        ctx.input_dtype = input.dtype
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, weight, invstd, total = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[0:3]
        g = grad_output.contiguous().to(xhat.dtype)
        dims, shape = _reduced_dims(xhat), _channel_shape(xhat)
        sum_dy = g.sum(dims)
        sum_dy_xhat = (g * xhat).sum(dims)
        grad_input = None
        if need_input:
            channels = sum_dy.numel()
            sums = synchronize(allreduce_async(torch.cat([sum_dy, sum_dy_xhat]), op=Sum,
                                               name="sync_batch_norm.sum_dy"))
            scale = invstd if weight is None else invstd * weight.to(xhat.dtype)
            grad_input = (g - (sums[:channels] / total).view(shape)
                          - xhat * (sums[channels:] / total).view(shape)) * scale.view(shape)
            grad_input = grad_input.to(ctx.input_dtype)
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None and need_weight else None
        grad_bias = sum_dy.to(weight.dtype) if weight is not None and need_bias else None
        return grad_input, grad_weight, grad_bias, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the samples of every rank (N-dimensional: input (N, C, ...)).

    Arguments as torch.nn.BatchNorm*d and Horovod's: num_features, eps=1e-5, momentum=0.1
    (None: cumulative average), affine=True, track_running_stats=True. Every rank must call it
    in the same order (its statistics travel as collectives)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def _average_factor(self):
        if self.momentum is not None:
            return self.momentum
        return 1.0 / float(self.num_batches_tracked)

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
        use_batch_stats = self.training or not self.track_running_stats
        factor = self._average_factor() if self.training and self.track_running_stats else 0.0
        if not use_batch_stats or size() == 1:
            return torch.nn.functional.batch_norm(
                input, self.running_mean, self.running_var, self.weight, self.bias,
                use_batch_stats, factor, self.eps)
        running_mean = self.running_mean if self.training else None
        running_var = self.running_var if self.training else None
        return _SyncBatchNorm.apply(input, self.weight, self.bias, running_mean, running_var,
                                    self.eps, factor)


__all__ = ["SyncBatchNorm"]

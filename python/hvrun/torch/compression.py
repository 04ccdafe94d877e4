"""Gradient compression for DistributedOptimizer, as horovod.torch.compression."""
import torch

from hvrun.compression import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 (half the bytes), other dtypes unchanged."""

    @staticmethod
    def compress(tensor):
        tensor_compressed = tensor
        if tensor.dtype.is_floating_point:
            tensor_compressed = tensor.type(torch.float16)
        return tensor_compressed, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        dtype = ctx
        if dtype.is_floating_point:
            return tensor.type(dtype)
        return tensor


class Compression:
    """Optional gradient compression algorithm used during allreduce."""

    none = NoneCompressor
    fp16 = FP16Compressor

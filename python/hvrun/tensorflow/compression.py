"""Gradient compression for allreduce, as horovod.tensorflow.compression."""
import tensorflow as tf

from hvrun.compression import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 (half the bytes of float32), others unchanged."""

    @staticmethod
    def compress(tensor):
        tensor_compressed = tensor
        if tensor.dtype.is_floating:
            tensor_compressed = tf.cast(tensor, dtype=tf.float16)
        return tensor_compressed, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        dtype = ctx
        if dtype.is_floating and tensor.dtype != dtype:
            return tf.cast(tensor, dtype=dtype)
        return tensor


class Compression:
    """Optional gradient compression algorithm used during allreduce."""

    none = NoneCompressor
    fp16 = FP16Compressor

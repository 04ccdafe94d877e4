"""hvrun.torch's tensors as the extension sees them: the dtype codes, zero-copy TensorRefs of
contiguous tensors (CUDA: with their device and current stream) and the library's result
buffers viewed as tensors without a copy."""
import numpy as np
import torch

from hvrun import _core
from hvrun._tensors import (BFLOAT16, FLOAT16, FLOAT32, FLOAT64, INT8, INT16, INT32, INT64,
                            UINT8)

_TORCH_DTYPES = {
    torch.uint8: UINT8, torch.int8: INT8, torch.int16: INT16, torch.int32: INT32,
    torch.int64: INT64, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16, torch.float32: FLOAT32,
    torch.float64: FLOAT64,
}
# Dtypes the operations that only move bytes (broadcast, allgather, alltoall) carry as another
# dtype of the same width.
_MOVED_AS = {torch.bool: torch.uint8}


def _ref(tensor, moving_bytes=False):
    """A zero-copy TensorRef of a contiguous tensor (CUDA: its device and current stream)."""
    dtype = tensor.dtype
    if moving_bytes and dtype in _MOVED_AS:
        tensor = tensor.view(_MOVED_AS[dtype])
        dtype = tensor.dtype
    code = _TORCH_DTYPES.get(dtype)
    if code is None:
        raise TypeError("hvrun does not support tensors of dtype %s (supported: uint8, int8, "
                        "int16, int32, int64, float16, bfloat16, float32, float64)" % (tensor.dtype,))
    device, stream = -1, 0
    if tensor.is_cuda:
        device = tensor.device.index
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
    return _core.TensorRef(tensor.data_ptr(), code, list(tensor.shape), device, stream)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _from_output(output, like):
    """The library's result buffer as a tensor of `like`'s dtype and device, without a copy."""
    if isinstance(output, np.ndarray):
        result = torch.from_numpy(output)  # the array keeps the handle, and its bytes, alive
    else:
        result = torch.as_tensor(output, device=like.device)  # __cuda_array_interface__
    if like.dtype in (torch.bfloat16, torch.bool) and result.dtype != like.dtype:
        result = result.view(like.dtype)
    return result

"""A trainer with named phases for test_straggler.py: each step marks "data" (2 ms of sleep;
SLOW_MS more on rank SLOW_RANK), "forward" (1 ms) and "backward" (a blocking allreduce and an
async one it then waits for), then mark_step().

    straggler_worker.py torch|numpy SLOW_RANK SLOW_MS STEPS
torch: hvrun.torch's (Horovod's) namespace; numpy: the hvrun package's."""
import sys
import time

import numpy as np

api, slow_rank, slow_ms, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

if api == "torch":
    import torch

    import hvrun.torch as hvd
    hvd.init()
    grad, small = torch.ones(4096), torch.ones(8)

    def backward():
        hvd.allreduce(grad, name="grad")
        hvd.synchronize(hvd.allreduce_async(small, name="small"))
else:
    import hvrun as hvd
    hvd.init()
    grad, small = np.ones(4096, dtype=np.float32), np.ones(8, dtype=np.float32)

    def backward():
        hvd.allreduce(grad, name="grad")
        hvd.allreduce_async(small, name="small").wait()

for step in range(steps):
    hvd.mark_phase("data")
    time.sleep((2 + (slow_ms if hvd.rank() == slow_rank else 0)) / 1000.0)
    hvd.mark_phase("forward")
    time.sleep(0.001)
    hvd.mark_phase("backward")
    backward()
    hvd.mark_step()
print("rank %d done" % hvd.rank())
hvd.shutdown()

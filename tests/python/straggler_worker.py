"""A trainer with named phases for test_straggler.py: each step marks "data" (2 ms of sleep;
SLOW_MS more on rank SLOW_RANK), "forward" (1 ms) and "backward" (a blocking allreduce and an
async one it then waits for), then mark_step().

    straggler_worker.py torch|numpy|tf SLOW_RANK SLOW_MS STEPS
torch: hvrun.torch's (Horovod's) namespace; numpy: the hvrun package's; tf: hvrun.tensorflow's,
every step one tf.function whose marks are ops (the sleeps there are tf.py_function calls)."""
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
elif api == "tf":
    import tensorflow as tf

    import hvrun.tensorflow as hvd
    hvd.init()
    data_seconds = (2 + (slow_ms if hvd.rank() == slow_rank else 0)) / 1000.0

    def sleep(seconds):
        time.sleep(seconds)
        return 0

    @tf.function
    def graph_step(grad, small):
        hvd.mark_phase("data")
        tf.py_function(lambda: sleep(data_seconds), [], tf.int32)
        hvd.mark_phase("forward")
        tf.py_function(lambda: sleep(0.001), [], tf.int32)
        hvd.mark_phase("backward")
        outputs = [hvd.allreduce(grad, name="grad"), hvd.allreduce(small, name="small")]
        # The collectives run when their inputs are ready: the step ends after them.
        with tf.control_dependencies(outputs):
            hvd.mark_step()
        return outputs

    grad, small = tf.ones([4096]), tf.ones([8])
    for step in range(steps):
        graph_step(grad, small)
    print("rank %d done" % hvd.rank())
    hvd.shutdown()
    sys.exit(0)
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

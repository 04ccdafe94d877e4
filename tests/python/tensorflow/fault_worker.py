"""Worker of test_tensorflow_faults.py, run under hvrun -np 2.

    killed:  rank 1 is SIGKILLed after a first allreduce; rank 0's next collective (in a
             tf.function) must raise naming rank 1, promptly.
    skipped: rank 1 never submits the second allreduce; rank 0's must fail (DeadlineExceededError)
             after --op-timeout, not wait for ever.
Rank 0 prints "RAISED after <s> s: <error class>: <message>" and exits 0."""
import os
import signal
import sys
import time

import tensorflow as tf

import hvrun.tensorflow as hvd

mode = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *_: None)  # rank 0 reports before hvrun's teardown ends it
hvd.init()
assert hvd.allreduce(tf.ones([4]), op=hvd.Sum).numpy().tolist() == [2.0] * 4
if hvd.rank() == 1:
    if mode == "killed":
        print("KILLING rank 1 pid %d" % os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)  # "skipped": alive, but never submits
    sys.exit(0)


@tf.function
def after():
    return hvd.allreduce(tf.ones([1 << 16]), op=hvd.Sum, name="after_" + mode)


start = time.monotonic()
try:
    after()
    print("NO ERROR", flush=True)
    sys.exit(3)
except tf.errors.OpError as e:
    print("RAISED after %.1f s: %s: %s" % (time.monotonic() - start, type(e).__name__, " ".join(e.message.split())),
          flush=True)
    os._exit(0)

"""Worker of test_tensorflow_faults.py's one-name-two-ops test, run under hvrun -np 2.

Eagerly, rank 0 allreduces under the name 'm' while rank 1 allgathers under 'm'. Each rank
prints "RAISED after <s> s: <error class>: <message>", then both allreduce 'm' (the name is
free again) and print "NEXT STEP OK"."""
import time

import tensorflow as tf

import hvrun.tensorflow as hvd

hvd.init()
assert hvd.allreduce(tf.ones([4]), op=hvd.Sum).numpy().tolist() == [2.0] * 4
t = tf.ones([4])
start = time.monotonic()
try:
    if hvd.rank() == 0:
        hvd.allreduce(t, name="m", op=hvd.Sum)
    else:
        hvd.allgather(t, name="m")
    print("NO ERROR", flush=True)
except tf.errors.OpError as e:
    print("RAISED after %.1f s: %s: %s" % (time.monotonic() - start, type(e).__name__,
                                           " ".join(e.message.split())), flush=True)
assert hvd.allreduce(t, name="m", op=hvd.Sum).numpy().tolist() == [2.0] * 4
# Unnamed eager calls of two kinds, one after the other, still run (their names are not the
# user's and never count as one name).
assert hvd.allgather(t).numpy().tolist() == [1.0] * 8
assert hvd.allreduce(t, op=hvd.Sum).numpy().tolist() == [2.0] * 4
print("NEXT STEP OK", flush=True)

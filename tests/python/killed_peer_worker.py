"""Worker of test_faults.py (run under hvrun -np 2): rank 1 is killed after a first allreduce;
rank 0's next collective must raise HorovodInternalError naming rank 1, within a bound."""
import os
import signal
import sys
import time

import torch

import hvrun.torch as hvd

# hvrun ends the job when a rank dies (SIGTERM to the others): rank 0 keeps running until it
# has reported what its collective raised.
signal.signal(signal.SIGTERM, lambda *_: None)
hvd.init()
assert torch.equal(hvd.allreduce(torch.ones(4), op=hvd.Sum), torch.full((4,), 2.0))
if hvd.rank() == 1:
    print("KILLING rank 1 pid %d" % os.getpid(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    hvd.allreduce(torch.ones(1 << 20), name="after.kill")
    print("NO ERROR", flush=True)
    sys.exit(3)
except hvd.HorovodInternalError as e:
    print("RAISED after %.1f s: %s: %s" % (time.monotonic() - start, type(e).__name__, e), flush=True)
    sys.exit(0)

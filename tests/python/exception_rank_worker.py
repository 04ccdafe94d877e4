"""Worker of test_failure_reports.py's repeated headline test (NumPy only, so a job takes well
under a second): rank 1 raises mid-loop, the interpreter ends with that exception."""
import numpy as np

import hvrun

hvrun.init()
for step in range(1000):
    if hvrun.rank() == 1 and step == 3:
        raise ValueError("boom at step %d" % step)
    hvrun.allreduce(np.ones(4, np.float32), name="grad.%d" % step, op=hvrun.Sum)

"""Sets Horovod's variables in os.environ before hvd.init(), as Horovod's docs allow: the
timeline file named by HOROVOD_TIMELINE (argv[1]) must be written; a coordinator setting set
this late (HOROVOD_CYCLE_TIME) must be reported, not dropped silently."""
import os
import sys
import warnings

os.environ["HOROVOD_TIMELINE"] = sys.argv[1]
os.environ["HOROVOD_CYCLE_TIME"] = "7"

import torch  # noqa: E402

import hvrun.torch as hvd  # noqa: E402

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    hvd.init()
late = [str(w.message) for w in caught if "HOROVOD_CYCLE_TIME=7" in str(w.message)]
if hvd.rank() == 0:
    assert late and "--cycle-time-ms" in late[0], [str(w.message) for w in caught]
for step in range(3):
    hvd.allreduce(torch.ones(4), name="init_environment.%d" % step)
hvd.shutdown()
print("init environment worker done", flush=True)

"""A Ray driver for test_ray_executor.py: joins the cluster at argv[1], starts 4 ranks training
for long, prints their pids and the coordinator's once rank 0 made the file argv[2] (it trains),
and trains until interrupted."""
import os
import sys
import threading
import time

import ray

import ray_train
from hvrun.ray import RayExecutor

ray.init(address=sys.argv[1], log_to_driver=False)
executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=4)
executor.start()
executor._ensure_coordinator()


def announce():
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(" ".join(str(p) for p in [s.pid for s in executor._slots] +
                   [executor._coordinator.pid]), flush=True)


threading.Thread(target=announce, daemon=True).start()
executor.run(ray_train.train, kwargs=dict(steps=10**7, marker=sys.argv[2]))

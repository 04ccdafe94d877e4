"""One rank of the Python autopsy test (tests/autopsy/autopsy_test.cc): steps of three
allreduces; before step 3, rank 1 sleeps inside its data loader (load_batch -> read_samples),
and hvrun's autopsy must name those Python lines without this script doing anything beyond
importing hvrun."""
import time

import numpy as np

import hvrun

STUCK_STEP = 3
STUCK_SECONDS = 60  # bounded: nothing outlives a broken test


def read_samples(step):
    if hvrun.rank() == 1 and step == STUCK_STEP:
        time.sleep(STUCK_SECONDS)  # the data loader hangs here
    return np.ones(16, np.float32)


def load_batch(step):
    return read_samples(step)


def main():
    hvrun.init()
    for step in range(STUCK_STEP + 1):
        batch = load_batch(step)
        handles = [hvrun.allreduce_async(batch * scale, name="grad.%s.%d" % (layer, step))
                   for layer, scale in (("fc1", 1), ("fc2", 2), ("out", 3))]
        for handle in handles:
            handle.wait()
    hvrun.shutdown()


if __name__ == "__main__":
    main()

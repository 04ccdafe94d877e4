"""Variables Horovod reads at init(), set by the trainer in os.environ before hvd.init() (not in
the launcher's environment): HOROVOD_TIMELINE writes the job's timeline (its own hvrun job)."""
import json
import os
import sys
import tempfile

from test_faults import HERE, run_job


def test_timeline_set_by_the_trainer_before_init_is_written():
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "timeline.json")
        env = {k: v for k, v in os.environ.items()
               if k not in ("HOROVOD_TIMELINE", "HVRUN_TIMELINE_FILENAME", "HOROVOD_CYCLE_TIME")}
        code, out = run_job(["-np", "2", sys.executable,
                             os.path.join(HERE, "init_environment_worker.py"), path],
                            timeout=90, env=env)
        assert code == 0, out
        assert out.count("init environment worker done") == 2, out
        with open(path) as f:
            events = json.load(f)  # shutdown closed it: whole JSON
        events = events["traceEvents"] if isinstance(events, dict) else events
        assert any("init_environment" in json.dumps(e) for e in events), events[:20]

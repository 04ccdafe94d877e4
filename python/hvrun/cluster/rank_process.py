"""Runs one rank where a cluster engine placed its task: a fresh Python process of its own.

Why a child process rather than the engine's worker itself: the engine's worker outlives the
task (Spark and Ray reuse them), while a rank needs a process that starts with its environment
(the job's variables and the secret, read once by hvrun's library at init) and ends with the
job, taking what it holds (threads, shared memory, GPU memory) with it. The child

- gets the secret in its own environment only (HVRUN_SECRET), never on its command line;
- is killed (SIGKILL) if the task's process dies (PR_SET_PDEATHSIG, set by rank_main itself: no
  code runs between fork and exec in a process that may have threads): an engine that cancels
  a task kills its worker, and the rank goes with it;
- runs in a process group of its own, which is killed when the rank ends, by the child's pid:
  nothing it started outlives it;
- writes its outcome on a pipe of its own, so its stdout and stderr stay the trainer's.
"""
import collections
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import cloudpickle

from hvrun.cluster.outcome import RankOutcome

TAIL_LINES = 20
_POLL_S = 0.1


def payload(fn, args=(), kwargs=None):
    """The bytes the child reads: fn with its arguments (cloudpickle, as engines pickle tasks)."""
    return cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))


def run_rank(slot, fn_payload, env_additions, secret, line_sink=None, should_stop=None):
    """Runs the payload as rank `slot.rank` and waits for it. `env_additions`: the variables
    `rank_environment` made, over this process's environment; `secret`: the job secret's value.
    `line_sink(stream, line)`: gets each line the rank writes, stream "stdout" or "stderr"
    (default: this process's own streams, prefixed "[rank]<stdout>:" as hvrun prefixes them).
    `should_stop()`: polled while it runs; True ends the rank (SIGKILL). Returns a RankOutcome."""
    env = dict(os.environ)
    env.update(env_additions)
    env["HVRUN_SECRET"] = secret
    result_read, result_write = os.pipe()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "hvrun.cluster.rank_main", str(result_write), str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            pass_fds=(result_write,), start_new_session=True)
    finally:
        os.close(result_write)
    sink = line_sink or _default_sink(slot.rank)
    tail = collections.deque(maxlen=TAIL_LINES)
    result = []
    threads = [
        threading.Thread(target=_feed, args=(child.stdin, fn_payload), daemon=True),
        threading.Thread(target=_lines, args=(child.stdout, "stdout", sink, tail), daemon=True),
        threading.Thread(target=_lines, args=(child.stderr, "stderr", sink, tail), daemon=True),
        threading.Thread(target=_read_all, args=(result_read, result), daemon=True),
    ]
    for thread in threads:
        thread.start()
    stopped = False
    try:
        # Waits without reaping: the child's pid, its process group's id, stays ours until the
        # group is killed below.
        while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            if should_stop is not None and should_stop():
                stopped = True
                break
            time.sleep(_POLL_S)
    finally:
        _kill_group(child.pid)
        child.wait()
        for thread in threads:
            thread.join(5.0)
    return _outcome(slot, child.returncode, result, list(tail), stopped)


def _outcome(slot, code, result, tail, stopped):
    record = pickle.loads(result[0]) if result and result[0] else None
    if record is not None and record[0] == "ok" and code == 0:
        return RankOutcome(slot.rank, slot.host, True, value=record[1])
    if record is not None and record[0] == "error":
        return RankOutcome(slot.rank, slot.host, False, cause=record[1], collateral=record[2],
                           output_tail=tail)
    if stopped:
        cause = "stopped: the driver ended the job"
    elif code is not None and code < 0:
        cause = "its process was killed by %s" % signal.Signals(-code).name
    elif record is not None:
        cause = "its process exited with code %d after returning" % code
    else:
        cause = "its process exited with code %s before returning" % code
    return RankOutcome(slot.rank, slot.host, False, cause=cause, output_tail=tail)


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(pipe, data):
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):
        pass  # the child ended before reading it all: its exit code says why


def _read_all(fd, out):
    with os.fdopen(fd, "rb") as pipe:
        out.append(pipe.read())


def _lines(pipe, stream, sink, tail):
    for raw in iter(pipe.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        tail.append(line)
        sink(stream, line)
    pipe.close()


def _default_sink(rank):
    lock = threading.Lock()

    def sink(stream, line):
        target = sys.stdout if stream == "stdout" else sys.stderr
        with lock:
            target.write("[%d]<%s>:%s\n" % (rank, stream, line))
            target.flush()
    return sink

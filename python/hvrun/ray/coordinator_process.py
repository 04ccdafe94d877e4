"""The job's coordinator (hvrun-coordinator), started and ended by the driver process.

The secret reaches the daemon on its stdin, never its argv; its stdin stays open for its whole
life (--exit-with-stdin), so the daemon ends by itself when the driver process ends, however it
ends.
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

_DAEMON = "hvrun-coordinator"


def find_daemon():
    """hvrun-coordinator beside libhvrun (../bin of its folder, or the folder itself), beside
    this Python (a virtual environment's bin/), then on PATH, as the worker library looks."""
    places = []
    library = _loaded_libhvrun()
    if library:
        folder = os.path.dirname(library)
        places += [os.path.join(folder, "..", "bin"), folder]
    places.append(os.path.dirname(sys.executable))
    for place in places:
        candidate = os.path.normpath(os.path.join(place, _DAEMON))
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(_DAEMON)
    if found is None:
        raise FileNotFoundError(
            "%s not found beside libhvrun (%s), beside %s or on PATH: install hvrun's wheel or "
            "put the build's bin/ on PATH" % (_DAEMON, library or "not loaded", sys.executable))
    return found


def _loaded_libhvrun():
    import hvrun._core  # noqa: F401  (loads libhvrun into this process)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith("libhvrun.so"):
                    return path
    except OSError:
        pass
    return None


class CoordinatorProcess:
    """One hvrun-coordinator for `world_size` ranks, listening on `host` (an address every
    worker reaches). `address` is what workers get as HVRUN_COORDINATOR_ADDR."""

    def __init__(self, world_size, host, secret, job_id, start_timeout_s, extra_args=()):
        argv = [find_daemon(), "--world-size", str(world_size), "--listen", "%s:0" % host,
                "--job-id", job_id, "--exit-with-stdin", "--start-timeout", str(start_timeout_s)]
        argv += list(extra_args)
        env = {k: v for k, v in os.environ.items() if k != "HVRUN_SECRET"}
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env, start_new_session=True)
        self.pid = self._process.pid
        self._stderr_lines = []
        self._process.stdin.write((secret + "\n").encode())
        self._process.stdin.flush()
        try:
            port = self._read_address(start_timeout_s).rsplit(":", 1)[1]
        except BaseException:
            self.stop()
            raise
        self.address = "%s:%s" % (host, port)
        self._stderr_thread = threading.Thread(target=self._copy_stderr, daemon=True,
                                               name="hvrun-coordinator-stderr")
        self._stderr_thread.start()

    def _read_address(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        out = self._process.stdout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([out], [], [], 0.2)
            if ready:
                line = out.readline().decode().strip()
                if line:
                    return line
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode().strip()
                raise RuntimeError("hvrun.ray: %s exited with code %d before printing its "
                                   "address: %s" % (_DAEMON, self._process.returncode, err))
        raise TimeoutError("hvrun.ray: %s (pid %d) printed no address within %s s"
                           % (_DAEMON, self.pid, timeout_s))

    def _copy_stderr(self):
        for raw in self._process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self._stderr_lines.append(line)
            print(line, file=sys.stderr, flush=True)

    def poll(self):
        """The daemon's exit code, or None while it runs."""
        return self._process.poll()

    def last_error_lines(self, count=5):
        return self._stderr_lines[-count:]

    def stop(self, grace_s=3.0):
        """Ends the daemon (SIGTERM, then SIGKILL past `grace_s`) and reaps it. Idempotent."""
        process = self._process
        if process.poll() is None:
            try:
                os.kill(process.pid, signal.SIGTERM)
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        if process.stdin and not process.stdin.closed:
            process.stdin.close()
        return process.wait()

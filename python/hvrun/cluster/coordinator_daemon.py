"""`hvrun-coordinator` run by a driver for ranks a cluster engine starts (docs/coordinator.md).

The daemon gets the secret as the first line of its stdin (never argv, never its environment)
and `--exit-with-stdin`: stdin stays a pipe only this process writes to, so however the driver
ends (an exception, Ctrl-C, even SIGKILL) the daemon sees end of file and ends the job itself.
It runs in a process group of its own, so a Ctrl-C at the driver's terminal reaches the driver
only and the driver ends it, by pid, in `stop()`. Its stderr (the coordinator's verdict on a
failed job: which rank failed first, and why) is copied to the driver's stderr and kept for the
driver's exception.
"""
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading


DAEMON = "hvrun-coordinator"


def find_daemon():
    """hvrun-coordinator beside this package's build (<build>/python/hvrun -> <build>/bin), in
    the scripts folder a wheel installs it to, beside the interpreter, then on PATH."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # hvrun/
    candidates = [
        os.path.join(package, "..", "..", "bin", DAEMON),
        os.path.join(sysconfig.get_path("scripts"), DAEMON),
        os.path.join(os.path.dirname(sys.executable), DAEMON),
    ]
    on_path = shutil.which(DAEMON)
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    raise FileNotFoundError(
        "%s not found (looked in %s): install hvrun's wheel, or put the build's bin/ on PATH"
        % (DAEMON, ", ".join(os.path.normpath(c) for c in candidates)))


class CoordinatorDaemon:
    """One running daemon; `address` is where ranks reach it. Use `start`."""

    def __init__(self, process, address, stderr_lines, stderr_reader):
        self.process = process
        self.address = address
        self._stderr_lines = stderr_lines
        self._stderr_reader = stderr_reader

    @property
    def pid(self):
        return self.process.pid

    @classmethod
    def start(cls, world_size, secret, job_id, listen="127.0.0.1:0", start_timeout=None,
              env=None, program=None, stderr=None, address_timeout=30.0):
        """Starts the daemon for `world_size` ranks and waits (up to `address_timeout` s) for
        its address. `listen`: "host:port" (port 0: a free one). `start_timeout` (s): how long
        it waits for every rank to register before failing the job naming who is missing.
        `env`: its environment (the driver's when None; HVRUN_* settings in it apply to the
        job; HVRUN_SECRET is removed). `stderr`: where its lines are copied (sys.stderr when
        None, nowhere when False)."""
        argv = [program or find_daemon(), "--world-size", str(world_size), "--job-id", job_id,
                "--listen", listen, "--exit-with-stdin"]
        if start_timeout is not None:
            argv += ["--start-timeout", str(int(start_timeout))]
        daemon_env = dict(os.environ if env is None else env)
        daemon_env.pop("HVRUN_SECRET", None)  # the secret comes on stdin, from us only
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=daemon_env, close_fds=True,
                                   start_new_session=True)
        lines = []
        sink = sys.stderr if stderr is None else stderr
        reader = threading.Thread(target=_copy_lines, args=(process.stderr, lines, sink),
                                  name="hvrun-coordinator-stderr", daemon=True)
        reader.start()
        daemon = cls(process, None, lines, reader)
        try:
            process.stdin.write((secret.reveal() + "\n").encode())
            process.stdin.flush()
            daemon.address = _first_line(process, address_timeout)
        except BaseException:
            daemon.stop()
            raise
        if not daemon.address:
            daemon.stop()
            raise RuntimeError("%s exited with code %s before printing its address: %s"
                               % (DAEMON, process.returncode, daemon.stderr_text() or "no output"))
        return daemon

    def exit_code(self):
        """Its exit code once it ended (0: every rank said goodbye), else None."""
        return self.process.poll()

    def stderr_text(self):
        """What it wrote on stderr so far (its verdict on a failed job)."""
        return "".join(self._stderr_lines).strip()

    def wait(self, timeout):
        """Waits up to `timeout` s for it to end by itself; its exit code, or None."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace=5.0):
        """Ends it (SIGTERM, then SIGKILL past `grace` s), reaps it and closes its pipes.
        Idempotent; safe on a daemon that ended by itself."""
        process = self.process
        if process.poll() is None:
            _signal(process.pid, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                _signal(process.pid, signal.SIGKILL)
                process.wait()
        for pipe in (process.stdin, process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._stderr_reader.join(grace)
        return process.returncode


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _copy_lines(pipe, lines, sink):
    for raw in iter(pipe.readline, b""):
        line = raw.decode(errors="replace")
        lines.append(line)
        if sink:
            sink.write(line)
            sink.flush()
    pipe.close()


def _first_line(process, timeout):
    """The daemon's first stdout line (its address), or None when it exits first."""
    result = []
    reader = threading.Thread(target=lambda: result.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        raise TimeoutError("%s (pid %d) printed no address within %.0f s"
                           % (DAEMON, process.pid, timeout))
    line = result[0].decode().strip()
    return line or None

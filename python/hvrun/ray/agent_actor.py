"""The actor that runs one host's `hvrun agent` on the Ray node the host names.

Its channel to hvrun's launcher is a TCP connection to the driver, which splices it to the
launcher's remote shell (agent_relay.py); the agent reads and writes that socket directly. The
agent dies with this actor (PR_SET_PDEATHSIG), and hvrun's ranks die with the agent: a Ray node
that goes away takes its ranks with it, and the launcher sees the host's agent lost."""
import os
import shlex
import subprocess
import sys

from hvrun.ray import control_channel
from hvrun.ray.secret_exchange import KeyPair

# Runs argv[1:] with PR_SET_PDEATHSIG (SIGKILL) set, which exec keeps: the agent dies with this
# actor. Set by the child itself, since a preexec_fn is unsafe in a process with threads (an
# actor's worker has several).
_EXEC_DYING_WITH_PARENT = (
    "import ctypes, os, signal, sys; "
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])")


class AgentActor:
    def __init__(self):
        self._key = KeyPair()

    def public_key(self):
        return self._key.public

    def serve(self, driver_address, driver_public, sealed_key, command):
        """Runs `command` (the launcher's `hvrun agent`) on the spliced channel; its exit code."""
        one_time = self._key.open(driver_public, sealed_key)
        sock = control_channel.connect(driver_address, "actor", one_time)
        env = dict(os.environ)
        env.pop(control_channel.TOKEN_VARIABLE, None)
        try:
            agent = subprocess.Popen(
                [sys.executable, "-c", _EXEC_DYING_WITH_PARENT] + shlex.split(command),
                stdin=sock.fileno(), stdout=sock.fileno(), env=env, close_fds=True)
        finally:
            sock.close()
        return agent.wait()

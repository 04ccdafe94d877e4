"""The actor that runs one host's `hvrun agent` on the Ray node the host names.

Its channel to hvrun's launcher is a TCP connection to the driver, which splices it to the
launcher's remote shell (agent_relay.py); the agent reads and writes that socket directly. The
agent dies with this actor (PR_SET_PDEATHSIG), and hvrun's ranks die with the agent: a Ray node
that goes away takes its ranks with it, and the launcher sees the host's agent lost."""
import ctypes
import os
import shlex
import signal
import subprocess

from hvrun.ray import control_channel
from hvrun.ray.secret_exchange import KeyPair

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
            agent = subprocess.Popen(shlex.split(command), stdin=sock.fileno(),
                                     stdout=sock.fileno(), env=env, close_fds=True,
                                     preexec_fn=_die_with_parent)
        finally:
            sock.close()
        return agent.wait()

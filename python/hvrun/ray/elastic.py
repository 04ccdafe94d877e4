"""ElasticRayExecutor: Horovod's elastic API on Ray (horovod.ray.ElasticRayExecutor), run by
hvrun's own elastic launcher.

The driver runs `hvrun` with --host-discovery-script and --rsh pointing back at itself:
- the discovery script prints the Ray nodes the driver last read from Ray's cluster state
  (discovery.py, refreshed every second), one host per node;
- hvrun starts each host's agent through the remote shell agent_relay.py, which asks the driver
  for an AgentActor on that Ray node (agent_actor.py) and carries the agent's channel;
- the ranks (elastic_worker.py) fetch the function from the driver and send back their results.
hvrun's elastic membership does the rest, as for any elastic hvrun job: a Ray node that goes
away takes its agent and ranks with it and the others reset and go on; a node that joins
gets ranks at the next commit (docs/elastic.md)."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import cloudpickle

from hvrun.cluster import find_daemon
from hvrun.exceptions import HvrunError
from hvrun.ray import control_channel
from hvrun.ray.agent_actor import AgentActor
from hvrun.ray.discovery import RayHostDiscovery, node_of_host
from hvrun.ray.secret_exchange import KeyPair

ENGINE = "hvrun.ray"
_DISCOVERY_PERIOD_S = 1.0
_TAIL_LINES = 30


class ElasticSettings:
    """What ElasticRayExecutor.create_settings returns; `discovery` may be replaced by any
    object with find_available_hosts_and_slots() (with override_discovery=False)."""

    def __init__(self, **values):
        self.__dict__.update(values)


class ElasticJobFailed(HvrunError):
    """hvrun's elastic job on Ray failed; the message carries hvrun's verdict (the rank, its
    host and the cause of the first failure) and `exit_code` hvrun's."""

    def __init__(self, message, exit_code):
        super().__init__(message, "ABORTED")
        self.exit_code = exit_code


class ElasticRayExecutor:
    """Runs a function on an elastic hvrun job over the Ray cluster's nodes (call ray.init()
    first). Each slot is `cpus_per_slot` CPUs (and, with use_gpu, `gpus_per_slot` GPUs) of a
    node, counted from the node's resources as Horovod counts them."""

    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        cooldown_range=None, verbose=None, **unused):
        if ssh_identity_file:
            raise ValueError("hvrun.ray starts its agents as Ray actors, never over ssh: "
                             "leave ssh_identity_file out")
        if unused:
            raise ValueError("hvrun.ray's elastic settings do not take %s"
                             % ", ".join(sorted(unused)))
        return ElasticSettings(min_num_proc=min_num_proc, max_num_proc=max_num_proc,
                               reset_limit=reset_limit, elastic_timeout=elastic_timeout,
                               timeout_s=timeout_s, nics=set(nics) if nics else None,
                               cooldown_range=cooldown_range, verbose=verbose, discovery=None)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        if gpus_per_slot and not use_gpu:
            raise ValueError("gpus_per_slot=%r needs use_gpu=True" % gpus_per_slot)
        self.settings = settings
        if override_discovery or settings.discovery is None:
            settings.discovery = RayHostDiscovery(use_gpu, cpus_per_slot, gpus_per_slot or 1)
        self.env_vars = dict(env_vars or {})
        self._started = False
        self._job = None

    def start(self):
        import ray
        if not ray.is_initialized():
            raise RuntimeError("%s: call ray.init() before ElasticRayExecutor.start()" % ENGINE)
        self._started = True

    def run(self, worker_fn, callbacks=None):
        """worker_fn() on every rank of the elastic job; the results of the ranks that finished,
        in rank order. Raises ElasticJobFailed with hvrun's verdict when the job fails."""
        if callbacks:
            raise ValueError("hvrun.ray does not take callbacks (Horovod's ray_logger): return "
                             "what rank 0 logs from the function instead")
        if not self._started:
            raise RuntimeError("%s: call start() first" % ENGINE)
        self._job = _ElasticJob(self.settings, self.env_vars, worker_fn)
        try:
            return self._job.run()
        finally:
            self._job.end()


class _ElasticJob:
    """One run(): the control listener, the discovery file, hvrun, the agent actors."""

    def __init__(self, settings, env_vars, fn):
        import ray
        self.settings = settings
        self.env_vars = env_vars
        self.fn_blob = cloudpickle.dumps(fn)
        self.token = secrets.token_hex(32)
        self.folder = tempfile.mkdtemp(prefix="hvrun-ray-")
        self.hosts_file = os.path.join(self.folder, "hosts")
        self.results = {}
        self.actors = []
        self.pending_relays = {}  # one-time key -> the relay's socket
        self.lock = threading.Lock()
        self.ending = threading.Event()
        self.listener = socket.create_server((ray.util.get_node_ip_address(), 0))
        self.address = "%s:%d" % self.listener.getsockname()[:2]
        self.hvrun = None
        self.output_tail = []

    # -- discovery ----------------------------------------------------------------------------

    def write_hosts(self):
        hosts = self.settings.discovery.find_available_hosts_and_slots()
        text = "".join("%s:%d\n" % (h, n) for h, n in sorted(hosts.items()))
        scratch = self.hosts_file + ".new"
        with open(scratch, "w") as f:
            f.write(text)
        os.replace(scratch, self.hosts_file)
        return hosts

    def discovery_loop(self):
        while not self.ending.wait(_DISCOVERY_PERIOD_S):
            try:
                self.write_hosts()
            except Exception as error:  # Ray busy: the file keeps its last hosts
                print("%s: reading Ray's nodes failed: %s" % (ENGINE, error), file=sys.stderr)

    # -- the control listener -------------------------------------------------------------------

    def accept_loop(self):
        while not self.ending.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(sock,), daemon=True,
                             name="hvrun-ray-control").start()

    def serve(self, sock):
        try:
            sock.settimeout(30)
            kind, credential, arg = control_channel.read_line(sock)
            sock.settimeout(None)
            if kind == "actor":
                with self.lock:
                    relay = self.pending_relays.pop(credential, None)
                if relay is None:
                    sock.close()
                    return
                control_channel.splice(relay, sock)
                return
            if not control_channel.same(credential, self.token):
                sock.close()
                return
            if kind == "relay":
                self.start_agent(sock, arg, control_channel.recv_blob(sock).decode())
            elif kind == "fn":
                control_channel.send_blob(sock, self.fn_blob)
                sock.close()
            elif kind == "result":
                blob = control_channel.recv_blob(sock)
                with self.lock:
                    self.results[int(arg)] = blob
                sock.sendall(b"k")
                sock.close()
        except (OSError, ValueError, ConnectionError) as error:
            print("%s: a control connection failed: %s" % (ENGINE, error), file=sys.stderr)
            sock.close()

    def start_agent(self, relay, host, command):
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        node = node_of_host(host)
        if node is None or self.ending.is_set():
            relay.close()  # hvrun sees the host's agent fail to start, and blacklists it
            return
        actor = ray.remote(AgentActor).options(
            num_cpus=0, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        with self.lock:
            self.actors.append(actor)
        one_time = secrets.token_hex(16)
        with self.lock:
            self.pending_relays[one_time] = relay
        driver_key = KeyPair()
        actor_public = ray.get(actor.public_key.remote())
        actor.serve.remote(self.address, driver_key.public,
                           driver_key.seal(actor_public, one_time), command)

    # -- hvrun ----------------------------------------------------------------------------------

    def hvrun_argv(self, np, hosts):
        s = self.settings
        hvrun = os.path.join(os.path.dirname(find_daemon()), "hvrun")
        script = os.path.join(self.folder, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec cat %s\n" % self.hosts_file)
        os.chmod(script, 0o700)
        # The first membership on the hosts discovered now (else hvrun would start it here).
        first_hosts = ",".join("%s:%d" % item for item in sorted(hosts.items()))
        argv = [hvrun, "-np", str(np), "-H", first_hosts, "--min-np", str(s.min_num_proc),
                "--host-discovery-script", script,
                "--rsh", "%s -m hvrun.ray.agent_relay" % sys.executable,
                "--start-timeout", str(s.timeout_s), "--elastic-timeout", str(s.elastic_timeout)]
        if s.max_num_proc:
            argv += ["--max-np", str(s.max_num_proc)]
        if s.reset_limit is not None:
            argv += ["--reset-limit", str(s.reset_limit)]
        if s.cooldown_range:
            argv += ["--blacklist-cooldown-range", "%s,%s" % tuple(s.cooldown_range)]
        if s.nics:
            argv += ["--network-interface", ",".join(sorted(s.nics))]
        if s.verbose and s.verbose >= 2:
            argv += ["--verbose"]
        return argv + [sys.executable, "-m", "hvrun.ray.elastic_worker"]

    def run(self):
        hosts = self.write_hosts()
        slots = sum(hosts.values())
        np = max(self.settings.min_num_proc, min(slots, self.settings.max_num_proc or slots))
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.env_vars.items()})
        env[control_channel.TOKEN_VARIABLE] = self.token
        env[control_channel.ADDRESS_VARIABLE] = self.address
        for target in (self.accept_loop, self.discovery_loop):
            threading.Thread(target=target, daemon=True, name="hvrun-ray-driver").start()
        if not hosts:
            raise RuntimeError("%s: no Ray node has a slot (%s)" % (
                ENGINE, vars(self.settings.discovery)))
        self.hvrun = subprocess.Popen(self.hvrun_argv(np, hosts), env=env, stderr=subprocess.PIPE,
                                      start_new_session=True)
        for raw in self.hvrun.stderr:
            line = raw.decode(errors="replace")
            sys.stderr.write(line)
            self.output_tail = (self.output_tail + [line.rstrip("\n")])[-_TAIL_LINES:]
        code = self.hvrun.wait()
        if code != 0:
            verdict = [line for line in self.output_tail if line.startswith("hvrun:")]
            raise ElasticJobFailed("%s: the elastic job failed (hvrun exited with code %d):\n%s"
                                   % (ENGINE, code, "\n".join(verdict or self.output_tail)),
                                   code)
        with self.lock:
            return [cloudpickle.loads(self.results[r]) for r in sorted(self.results)]

    def end(self):
        """Ends whatever is left: hvrun (SIGTERM to its process group, then SIGKILL), the agent
        actors, the listener, the job's files. Idempotent."""
        import ray
        self.ending.set()
        if self.hvrun is not None and self.hvrun.poll() is None:
            _signal_group(self.hvrun.pid, signal.SIGTERM)
            try:
                self.hvrun.wait(15)
            except subprocess.TimeoutExpired:
                _signal_group(self.hvrun.pid, signal.SIGKILL)
                self.hvrun.wait()
        self.listener.close()
        with self.lock:
            actors, self.actors = self.actors, []
            relays, self.pending_relays = list(self.pending_relays.values()), {}
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        for relay in relays:
            relay.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _signal_group(pid, signum):
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass

"""RayExecutor: Horovod's Ray API (horovod.ray.RayExecutor) over hvrun.

The driver (the process that calls start()) reserves one slot per worker in a placement group,
starts one worker actor per slot, makes each a rank (placement.py), starts the job's
hvrun-coordinator itself and gives each worker the variables hvrun's launcher gives a rank
(hvrun.cluster, the driver core cluster engines share), and the job's secret sealed for it
(secret_exchange.py). run() and execute() call a function on every worker and return the
results in rank order; a failure ends the job on every worker and raises hvrun.cluster's
JobFailed naming each failed rank, its host and the cause (failures.py)."""
import secrets

from hvrun.cluster import CoordinatorDaemon, JobIdentity, JobSecret
from hvrun.ray import placement
from hvrun.ray.failures import ENGINE, gather
from hvrun.ray.secret_exchange import KeyPair
from hvrun.ray.worker import BaseHorovodWorker


class MiniSettings:
    """What create_settings() returns: the job's timeouts and network interfaces."""

    def __init__(self, timeout_s=30, placement_group_timeout_s=100, nics=None):
        self.timeout_s = timeout_s
        self.placement_group_timeout_s = placement_group_timeout_s
        self.nics = set(nics) if nics else None

    @property
    def start_timeout(self):
        return self.timeout_s


class RayExecutor:
    """Runs a function on `num_workers` (or `num_hosts` x `num_workers_per_host`) hvrun ranks,
    each a Ray actor with `cpus_per_worker` CPUs and, with `use_gpu`, `gpus_per_worker` GPUs
    (default 1). Call ray.init() first."""

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """timeout_s: the rendezvous deadline (hvrun's --start-timeout); nics: the interfaces
        the ranks' data plane may use (GLOO_SOCKET_IFNAME). hvrun starts nothing over ssh, so
        ssh_identity_file and ssh_str are refused rather than ignored."""
        if ssh_identity_file or ssh_str:
            raise ValueError("hvrun.ray starts its workers as Ray actors, never over ssh: "
                             "leave ssh_identity_file and ssh_str out")
        return MiniSettings(timeout_s, placement_group_timeout_s, nics)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=600,
                 override_discovery=True):
        if min_workers is not None or max_workers is not None:
            raise ValueError("an elastic job on Ray is hvrun.ray.ElasticRayExecutor "
                             "(min_workers/max_workers are not taken by RayExecutor)")
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("give either num_workers, or num_hosts (with num_workers_per_host)")
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host),
                            ("cpus_per_worker", cpus_per_worker)):
            if value is not None and value < (0 if name == "cpus_per_worker" else 1):
                raise ValueError("%s=%r: expected a positive count" % (name, value))
        if gpus_per_worker and not use_gpu:
            raise ValueError("gpus_per_worker=%r needs use_gpu=True" % gpus_per_worker)
        self.settings = settings
        self.num_workers = num_workers if num_hosts is None else num_hosts * num_workers_per_host
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []          # actors, in rank order
        self._slots = []           # placement.Slot of each, in rank order
        self._placement_group = None
        self._own_placement_group = False
        self._coordinator = None
        self._secret = None
        self._job_id = None
        self._extra_env = {}

    # -- start and shutdown -------------------------------------------------------------------

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the workers, makes each a rank and creates `executable_cls` in each."""
        import ray
        if not ray.is_initialized():
            raise RuntimeError("%s: call ray.init() before RayExecutor.start()" % ENGINE)
        if self.workers:
            raise RuntimeError("%s: this executor was started already" % ENGINE)
        self._secret = JobSecret()
        self._job_id = "ray-" + secrets.token_hex(6)
        self._extra_env = dict(extra_env_vars or {})
        try:
            slots = self._place_workers()
            self._slots = placement.assign_ranks(slots)
            self.workers = [self.workers[s.index] for s in self._slots]
            self._hand_over_secret()
            ray.get([w.start_executable.remote(executable_cls, executable_args,
                                               executable_kwargs) for w in self.workers])
        except BaseException:
            self.shutdown()
            raise

    def _place_workers(self):
        """Starts one actor per slot (self.workers, in creation order) and returns the Slot
        each reported."""
        import ray
        from ray.util.placement_group import (get_current_placement_group, placement_group,
                                              remove_placement_group)
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        bundles, strategy, bundle_of = placement.bundles(
            self.num_workers, self.num_hosts, self.num_workers_per_host, self.cpus_per_worker,
            self.gpus_per_worker)
        current = get_current_placement_group() if self.use_current_placement_group else None
        if current is not None:
            if len(current.bundle_specs) < len(bundles):
                raise ValueError("hvrun.ray: the current placement group has %d bundles, the "
                                 "job needs %d" % (len(current.bundle_specs), len(bundles)))
            self._placement_group = current
        else:
            self._placement_group = placement_group(bundles, strategy=strategy)
            self._own_placement_group = True
            timeout = self.settings.placement_group_timeout_s
            try:
                ray.get(self._placement_group.ready(), timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                remove_placement_group(self._placement_group)
                self._placement_group = None
                raise TimeoutError(
                    "hvrun.ray: Ray could not reserve %d x %s (%s) within %s s "
                    "(placement_group_timeout_s); the cluster has %s" % (
                        len(bundles), bundles[0], strategy, timeout,
                        ray.available_resources())) from None
        actor_class = ray.remote(BaseHorovodWorker)
        self.workers = [actor_class.options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker, max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                self._placement_group, placement_group_bundle_index=bundle_of[i]),
        ).remote(world_rank=i, world_size=self.num_workers) for i in range(self.num_workers)]
        return placement.slots_from(ray.get([a.describe.remote() for a in self.workers]))

    def _hand_over_secret(self):
        import ray
        driver_key = KeyPair()
        ray.get([worker.take_secret.remote(driver_key.public, driver_key.seal(
            slot.public_key, self._secret.reveal())) for slot, worker in zip(self._slots,
                                                                             self.workers)])

    def shutdown(self):
        """Ends the job: every worker actor, the placement group this executor made, the
        coordinator. Idempotent."""
        import ray
        for worker in self.workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception:  # an actor already gone
                pass
        self.workers = []
        if self._placement_group is not None and self._own_placement_group:
            from ray.util.placement_group import remove_placement_group
            try:
                remove_placement_group(self._placement_group)
            except Exception:
                pass
        self._placement_group = None
        if self._coordinator is not None:
            self._coordinator.stop()
            self._coordinator = None

    # -- calls on the workers ------------------------------------------------------------------

    def execute(self, fn, callbacks=None):
        """fn(executable) on every worker; the results in rank order."""
        _refuse_callbacks(callbacks)
        return self._call_all(lambda w: w.execute.remote(fn))

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every worker; the results in rank order."""
        _refuse_callbacks(callbacks)
        return self._call_all(lambda w: w.run.remote(fn, args, kwargs))

    def run_remote(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every worker; their ObjectRefs in rank order (ray.get them)."""
        self._ensure_coordinator()
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def execute_single(self, fn):
        """fn(executable) on rank 0 alone."""
        import ray
        self._check_started()
        return ray.get(self.workers[0].execute.remote(fn))

    def _call_all(self, call):
        self._ensure_coordinator()
        try:
            results = gather([call(w) for w in self.workers], self._slots, self._coordinator)
        except BaseException:
            # A failed worker, or the driver interrupted: nothing of the job may stay behind.
            self.shutdown()
            raise
        self._after_call()
        return results

    def _check_started(self):
        if not self.workers:
            raise RuntimeError("hvrun.ray: call start() first (or the job was shut down)")

    def _ensure_coordinator(self):
        """A running coordinator for the next call: the first, or a new one once the last
        ended (every rank shut hvrun down, which ends a coordinator's job)."""
        import ray
        self._check_started()
        if self._coordinator is not None and self._coordinator.exit_code() is None:
            return
        if self._coordinator is not None:
            self._coordinator.stop()
        self._coordinator = CoordinatorDaemon.start(
            self.num_workers, self._secret, self._job_id,
            listen="%s:0" % ray.util.get_node_ip_address(), start_timeout=self.settings.timeout_s)
        identity = JobIdentity(self._job_id, self._coordinator.address)
        ray.get([w.update_env_vars.remote(placement.worker_environment(
            slot, identity, self.settings.timeout_s, self.settings.nics, self._extra_env))
            for slot, w in zip(self._slots, self.workers)])

    def _after_call(self):
        import ray
        if self._coordinator is None:
            return
        if any(ray.get([w.hvrun_initialized.remote() for w in self.workers])):
            return
        # No rank holds hvrun now (each shut it down, or never used it): this coordinator has
        # no job left; the next call starts another, with a fresh rendezvous deadline.
        self._coordinator.stop()
        self._coordinator = None


def _refuse_callbacks(callbacks):
    if callbacks:
        raise ValueError("hvrun.ray does not take callbacks (Horovod's ray_logger): return "
                         "what rank 0 logs from the function instead")

// Every tunable of hvrun, once. Keep docs/settings.md's settings table in step with this list
// (tests/common/settings_doc_test.cc checks that every flag and variable is documented).
#include <array>

#include "common/settings.h"

namespace hvrun {
namespace {

constexpr std::array kCatalog = {
    SettingSpec{.name = "log_level", .flag = "--log-level", .env = "HVRUN_LOG_LEVEL",
                .kind = SettingKind::kChoice, .default_value = "info",
                .choices = "trace|debug|info|warn|error|off",
                .choice_aliases = "warning=warn|fatal=error", .scope = "all",
                .description = "Log level of hvrun, the coordinator and the worker library "
                               "(Horovod's WARNING and FATAL are read as warn and error)."},
    SettingSpec{.name = "log_timestamps", .flag = "--log-timestamps",
                .env = "HVRUN_LOG_TIMESTAMPS", .kind = SettingKind::kBool,
                .default_value = "true", .scope = "all",
                .description = "Start every log line of hvrun, the coordinator and the worker "
                               "library with the time of day (--log-timestamps=false hides it)."},

    SettingSpec{.name = "verbose", .flag = "--verbose", .env = "HVRUN_VERBOSE",
                .kind = SettingKind::kBool, .default_value = "false", .scope = "launcher",
                .description = "Print the job plan, the per-rank environment hvrun sets and why "
                               "each NCCL setting was chosen."},
    SettingSpec{.name = "output_filename", .flag = "--output-filename",
                .env = "HVRUN_OUTPUT_FILENAME", .kind = SettingKind::kString,
                .default_value = "", .unit = "directory", .scope = "launcher",
                .description = "Also write each rank's stdout and stderr to files under this "
                               "directory (still echoed to the terminal)."},
    SettingSpec{.name = "grace_period_s", .flag = "--grace-period",
                .env = "HVRUN_GRACE_PERIOD", .kind = SettingKind::kDouble,
                .default_value = "5", .min = 0, .max = 3600, .unit = "seconds",
                .scope = "launcher",
                .description = "After a failure or a signal, how long workers get between "
                               "SIGTERM and SIGKILL."},
    SettingSpec{.name = "gpu_pinning", .flag = "--gpu-pinning", .env = "HVRUN_GPU_PINNING",
                .kind = SettingKind::kChoice, .default_value = "local-rank",
                .choices = "local-rank|visible-devices", .scope = "launcher",
                .description = "local-rank: every GPU stays visible and the worker library "
                               "selects GPU <local rank>; visible-devices: CUDA_VISIBLE_DEVICES "
                               "is set to that one GPU."},
    SettingSpec{.name = "nccl_p2p", .flag = "--nccl-p2p", .env = "HVRUN_NCCL_P2P",
                .kind = SettingKind::kChoice, .default_value = "auto",
                .choices = "auto|on|off", .scope = "launcher",
                .description = "NCCL peer-to-peer: off sets NCCL_P2P_DISABLE=1; auto does so "
                               "only when a GPU pair on the host reports no peer access."},
    SettingSpec{.name = "device", .flag = "--device", .env = "HVRUN_DEVICE",
                .kind = SettingKind::kChoice, .default_value = "auto",
                .choices = "auto|gpu|cpu", .scope = "launcher",
                .description = "auto: a GPU job when this host has a visible GPU (one rank per "
                               "GPU at most); gpu: require GPUs; cpu: ignore GPUs (no pinning, "
                               "no NCCL tuning, any number of ranks)."},
    SettingSpec{.name = "bind_to", .flag = "--bind-to", .env = "HVRUN_BIND_TO",
                .kind = SettingKind::kChoice, .default_value = "none", .choices = "none|block",
                .scope = "launcher",
                .description = "CPU binding of the workers: none leaves placement to the kernel; "
                               "block gives every local rank its own equal share of the physical "
                               "cores hvrun may use (whole cores)."},
    SettingSpec{.name = "tag_output", .flag = "--tag-output", .env = "HVRUN_TAG_OUTPUT",
                .kind = SettingKind::kBool, .default_value = "true", .scope = "launcher",
                .description = "Prefix every line a worker prints with [rank]<stdout>: or "
                               "[rank]<stderr>: (--tag-output=false turns it off)."},
    SettingSpec{.name = "output_timestamps", .flag = "--output-timestamps",
                .env = "HVRUN_OUTPUT_TIMESTAMPS", .kind = SettingKind::kBool,
                .default_value = "false", .scope = "launcher",
                .description = "Start every line a worker prints with the time it reached hvrun, "
                               "as horovodrun --prefix-output-with-timestamp does ('Wed Dec  2 "
                               "02:14:35 2026[0]<stdout>:...')."},
    SettingSpec{.name = "ssh_port", .flag = "--ssh-port", .env = "HVRUN_SSH_PORT",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 65535,
                .unit = "port", .scope = "launcher",
                .description = "Multi-host jobs: port of the remote hosts' sshd (-p); 0 = "
                               "ssh's own default."},
    SettingSpec{.name = "ssh_identity_file", .flag = "--ssh-identity-file",
                .env = "HVRUN_SSH_IDENTITY_FILE", .kind = SettingKind::kString,
                .default_value = "", .unit = "file", .scope = "launcher",
                .description = "Multi-host jobs: private key ssh logs in with (-i)."},
    SettingSpec{.name = "rsh", .flag = "--rsh", .env = "HVRUN_RSH", .kind = SettingKind::kString,
                .default_value = "ssh", .unit = "command", .scope = "launcher",
                .description = "Multi-host jobs: the remote shell that starts 'hvrun agent' on "
                               "each host, split at spaces; BatchMode is added for ssh."},
    SettingSpec{.name = "remote_launcher", .flag = "--remote-launcher",
                .env = "HVRUN_REMOTE_LAUNCHER", .kind = SettingKind::kChoice,
                .default_value = "auto", .choices = "auto|ssh|srun", .scope = "launcher",
                .description = "Multi-host jobs: how 'hvrun agent' is started on each host: "
                               "srun (a one-task step per node of the Slurm allocation), ssh "
                               "(--rsh), or auto: srun inside a Slurm allocation, else ssh."},
    SettingSpec{.name = "srun_args", .flag = "--srun-args", .env = "HVRUN_SRUN_ARGS",
                .kind = SettingKind::kString, .default_value = "", .unit = "ARGS",
                .scope = "launcher",
                .description = "Multi-host jobs started with srun: more srun options for every "
                               "agent's step, split at spaces (e.g. --gres=gpu:4)."},
    SettingSpec{.name = "mpi", .flag = "--mpi", .env = "HVRUN_MPI", .kind = SettingKind::kBool,
                .default_value = "false", .scope = "launcher",
                .description = "Hand the job to Open MPI's mpirun: hvrun runs the coordinator "
                               "and supervises mpirun, which starts the ranks."},
    SettingSpec{.name = "mpi_args", .flag = "--mpi-args", .env = "HVRUN_MPI_ARGS",
                .kind = SettingKind::kString, .default_value = "", .unit = "ARGS",
                .scope = "launcher",
                .description = "With --mpi: more mpirun arguments, split like a shell's words."},
    SettingSpec{.name = "network_interface", .flag = "--network-interface",
                .env = "HVRUN_NETWORK_INTERFACE", .kind = SettingKind::kString,
                .default_value = "", .unit = "NAME[,NAME]", .scope = "launcher",
                .description = "Multi-host jobs: use these interfaces (the first one a host has) "
                               "instead of probing which ones peers reach."},
    SettingSpec{.name = "network", .flag = "--network", .env = "HVRUN_NETWORK",
                .kind = SettingKind::kChoice, .default_value = "auto",
                .choices = "auto|ethernet", .scope = "launcher",
                .description = "ethernet sets NCCL_IB_DISABLE=1 for every worker (no "
                               "InfiniBand/RoCE); auto lets NCCL decide."},

    SettingSpec{.name = "start_timeout_s", .flag = "--start-timeout",
                .env = "HVRUN_START_TIMEOUT", .kind = SettingKind::kDouble,
                .default_value = "30", .min = 0.1, .max = 86400, .unit = "seconds",
                .scope = "coordinator",
                .description = "How long rendezvous waits for every rank to register, counted "
                               "from the first registration."},
    SettingSpec{.name = "coordinator_port", .flag = "--coordinator-port",
                .env = "HVRUN_COORDINATOR_PORT", .kind = SettingKind::kInt,
                .default_value = "0", .min = 0, .max = 65535, .unit = "port",
                .scope = "coordinator",
                .description = "TCP port of the coordinator; 0 picks a free one."},
    SettingSpec{.name = "fusion_threshold_mb", .flag = "--fusion-threshold-mb",
                .env = "HVRUN_FUSION_THRESHOLD", .kind = SettingKind::kDouble,
                .default_value = "128", .min = 0, .max = 65536, .unit = "MiB",
                .scope = "coordinator",
                .description = "Largest fused buffer; ready tensors are packed into responses "
                               "of at most this size. 0 turns fusion off."},
    SettingSpec{.name = "cycle_time_ms", .flag = "--cycle-time-ms", .env = "HVRUN_CYCLE_TIME",
                .kind = SettingKind::kDouble, .default_value = "1", .min = 0, .max = 10000,
                .unit = "ms", .scope = "coordinator",
                .description = "Longest time requests are collected for fusion; a lone request "
                               "with nothing else coming does not wait for it. Also how long "
                               "a rank's asynchronous submissions of negotiated CPU tensors "
                               "gather before it runs them by agreement with its peers (a "
                               "burst still arriving gathers on, up to twice as long; a "
                               "thread waiting for one runs them at once)."},
    SettingSpec{.name = "cache_capacity", .flag = "--cache-capacity",
                .env = "HVRUN_CACHE_CAPACITY", .kind = SettingKind::kInt,
                .default_value = "1024", .min = 0, .max = 1048576, .unit = "entries",
                .scope = "coordinator",
                .description = "Response cache entries; cached tensors are negotiated by a "
                               "small id instead of name and shape. 0 turns the cache off."},
    SettingSpec{.name = "stall_check", .flag = "--stall-check", .env = "HVRUN_STALL_CHECK",
                .kind = SettingKind::kBool, .default_value = "true", .scope = "coordinator",
                .description = "The stall inspector: false turns off both its warning and its "
                               "shutdown (Horovod's --no-stall-check)."},
    SettingSpec{.name = "stall_warning_s", .flag = "--stall-check-warning-time-seconds",
                .env = "HVRUN_STALL_CHECK_TIME_SECONDS", .kind = SettingKind::kDouble,
                .default_value = "60", .min = 0, .max = 86400, .unit = "seconds",
                .scope = "coordinator",
                .description = "Log a warning, once per stall, naming the missing ranks, the "
                               "tensors they have not submitted and the last operation each "
                               "completed, when a tensor some ranks submitted has waited this "
                               "long for the others. 0 turns it off."},
    SettingSpec{.name = "stall_shutdown_s", .flag = "--stall-check-shutdown-time-seconds",
                .env = "HVRUN_STALL_SHUTDOWN_TIME_SECONDS", .kind = SettingKind::kDouble,
                .default_value = "600", .min = 0, .max = 86400, .unit = "seconds",
                .scope = "coordinator",
                .description = "Abort the job, naming the tensor and the missing ranks (after "
                               "an autopsy), when a tensor has waited this long for some "
                               "ranks. 0 = never."},
    SettingSpec{.name = "op_mismatch_grace_s", .flag = "--op-mismatch-grace-seconds",
                .env = "HVRUN_OP_MISMATCH_GRACE_SECONDS", .kind = SettingKind::kDouble,
                .default_value = "2", .min = 0, .max = 86400, .unit = "seconds",
                .scope = "coordinator",
                .description = "Fail, on every rank, the collectives of a name that ranks "
                               "submitted as different ops (allreduce 'm' on some ranks, "
                               "allgather 'm' on others) once each of those ranks has waited "
                               "on it alone, submitting nothing else, this long. 0 = never "
                               "(the stall inspector still reports it)."},
    SettingSpec{.name = "heartbeat_timeout_s", .flag = "--heartbeat-timeout",
                .env = "HVRUN_HEARTBEAT_TIMEOUT", .kind = SettingKind::kDouble,
                .default_value = "30", .min = 0, .max = 86400, .unit = "seconds",
                .scope = "coordinator",
                .description = "Abort the job, naming the rank and host, when a worker's "
                               "negotiation stream has been silent this long (workers "
                               "heartbeat every timeout/10, at most every second). 0 = never."},
    SettingSpec{.name = "join_average", .flag = "--join-average", .env = "HVRUN_JOIN_AVERAGE",
                .kind = SettingKind::kChoice, .default_value = "contributing",
                .choices = "contributing|all", .scope = "coordinator",
                .description = "Average while ranks have joined: contributing divides by the "
                               "ranks that contributed data; all divides by every rank "
                               "(Horovod's behaviour)."},

    SettingSpec{.name = "op_timeout_s", .flag = "--op-timeout", .env = "HVRUN_OP_TIMEOUT",
                .kind = SettingKind::kDouble, .default_value = "300", .min = 0.1,
                .max = 86400, .unit = "seconds", .scope = "worker",
                .description = "Bounds every data-plane operation of the worker library and "
                               "every handle wait without an explicit timeout."},
    SettingSpec{.name = "cpu_backend", .flag = "--cpu-backend", .env = "HVRUN_CPU_BACKEND",
                .kind = SettingKind::kChoice, .default_value = "auto",
                .choices = "auto|shm|gloo", .scope = "worker",
                .description = "Data plane for CPU tensors. auto/shm: shared memory among the "
                               "ranks of a host (hierarchical with Gloo across hosts, see "
                               "--hierarchical-allreduce); gloo: Gloo over TCP for everything."},
    SettingSpec{.name = "device_plane", .flag = "--device-plane", .env = "HVRUN_DEVICE_PLANE",
                .kind = SettingKind::kChoice, .default_value = "cuda", .choices = "cuda|host",
                .scope = "worker",
                .description = "Data plane for CUDA tensors. cuda: NCCL on the GPUs (the "
                               "plugin libhvrun_cuda.so); host: for tests and CPU proofs only, "
                               "the same GPU executor over host memory shared between the ranks "
                               "(a CUDA tensor's data is then a host pointer; no GPU is used)."},
    SettingSpec{.name = "hierarchical_allreduce", .flag = "--hierarchical-allreduce",
                .env = "HVRUN_HIERARCHICAL_ALLREDUCE", .kind = SettingKind::kChoice,
                .default_value = "auto", .choices = "auto|on|off", .bare_value = "on",
                .scope = "worker",
                .description = "Multi-host CPU jobs: allreduce in shared memory within each "
                               "host and with Gloo among one rank per host; auto = on when some "
                               "host runs more than one rank; off = Gloo among all ranks. Bare "
                               "(as Horovod's flag) it means on; a value goes after '='."},
    SettingSpec{.name = "shm_chunk_kb", .flag = "--shm-chunk-kb", .env = "HVRUN_SHM_CHUNK_KB",
                .kind = SettingKind::kInt, .default_value = "1024", .min = 4, .max = 262144,
                .unit = "KiB", .scope = "worker",
                .description = "Shared-memory data plane: bytes per rank per pipelined step "
                               "(one slot; the segment holds 3 x ranks per host slots)."},
    SettingSpec{.name = "fast_path", .flag = "--fast-path", .env = "HVRUN_FAST_PATH",
                .kind = SettingKind::kBool, .default_value = "true", .scope = "worker",
                .description = "Jobs on the shared-memory data plane: a blocking allreduce "
                               "of a tensor the coordinator already negotiated runs without it "
                               "when every rank is idle and calls the same one (single-host "
                               "jobs), and async ones as soon as every rank submitted them "
                               "(agreed through shared memory, and across hosts through a round "
                               "arbiter on rank 0; anything else goes through the coordinator as "
                               "usual)."},
    SettingSpec{.name = "fast_path_wait_ms", .flag = "--fast-path-wait-ms",
                .env = "HVRUN_FAST_PATH_WAIT_MS", .kind = SettingKind::kDouble,
                .default_value = "50", .min = 0.01, .max = 10000, .unit = "milliseconds",
                .scope = "worker",
                .description = "How long a rank waits in the fast path for the other ranks to "
                               "call the same allreduce before it hands the call to the "
                               "coordinator (which then reports stalls as usual); on several "
                               "hosts also how long the round arbiter waits for every host."},
    SettingSpec{.name = "max_restarts", .flag = "--max-restarts", .env = "HVRUN_MAX_RESTARTS",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 1000,
                .unit = "restarts", .scope = "launcher",
                .description = "When a worker fails, tear the job down and start it again on "
                               "the same hosts, up to this many times (HVRUN_RESTART_COUNT tells "
                               "the workers which attempt they are); 0 = never."},
    SettingSpec{.name = "min_np", .flag = "--min-np", .env = "HVRUN_MIN_NP",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 1000000,
                .unit = "ranks", .scope = "launcher",
                .description = "Elastic jobs (this, --max-np or --host-discovery-script makes "
                               "the job elastic; docs/elastic.md): a lost rank ends only the "
                               "membership and the survivors go on; with fewer slots than this "
                               "the job waits up to --elastic-timeout for the discovery script's "
                               "hosts (without a script it fails at once), then fails naming "
                               "what was lost. 0 = -np."},
    SettingSpec{.name = "max_np", .flag = "--max-np", .env = "HVRUN_MAX_NP",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 1000000,
                .unit = "ranks", .scope = "launcher",
                .description = "Elastic jobs: the most ranks the job grows to when "
                               "--host-discovery-script finds slots; 0 = no limit."},
    SettingSpec{.name = "host_discovery_script", .flag = "--host-discovery-script",
                .env = "HVRUN_HOST_DISCOVERY_SCRIPT", .kind = SettingKind::kString,
                .default_value = "", .unit = "program", .scope = "launcher",
                .description = "Elastic jobs: a program hvrun runs every second that prints the "
                               "hosts the job may use, one 'host:slots' (or 'host', with "
                               "--slots-per-host) per line; new slots join at the trainer's next "
                               "commit, missing hosts get no new ranks."},
    SettingSpec{.name = "slots_per_host", .flag = "--slots-per-host",
                .env = "HVRUN_SLOTS_PER_HOST", .kind = SettingKind::kInt, .default_value = "0",
                .min = 0, .max = 4096, .unit = "slots", .scope = "launcher",
                .description = "Elastic jobs: the slots of a host the discovery script prints "
                               "without ':slots'; 0 = such a line is an error."},
    SettingSpec{.name = "elastic_timeout_s", .flag = "--elastic-timeout",
                .env = "HVRUN_ELASTIC_TIMEOUT", .kind = SettingKind::kDouble,
                .default_value = "600", .min = 0.1, .max = 86400, .unit = "seconds",
                .scope = "launcher",
                .description = "Elastic jobs: how long the job may run short of --min-np slots "
                               "(waiting for hosts) and how long a reset's rendezvous may wait, "
                               "before the job fails."},
    SettingSpec{.name = "reset_limit", .flag = "--reset-limit", .env = "HVRUN_RESET_LIMIT",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 1000000,
                .unit = "resets", .scope = "launcher",
                .description = "Elastic jobs: fail the job at the reset after this many (lost "
                               "ranks and added slots alike); 0 = no limit."},
    SettingSpec{.name = "blacklist_cooldown_range", .flag = "--blacklist-cooldown-range",
                .env = "HVRUN_BLACKLIST_COOLDOWN_RANGE", .kind = SettingKind::kString,
                .default_value = "", .unit = "MIN,MAX seconds", .scope = "launcher",
                .description = "Elastic jobs: a host where a rank failed gets no new rank for a "
                               "random time between MIN and MAX seconds, doubled at each "
                               "further failure (Horovod's 'MIN MAX' is accepted too); empty = "
                               "for the rest of the job."},
    SettingSpec{.name = "health_check", .flag = "--health-check", .env = "HVRUN_HEALTH_CHECK",
                .kind = SettingKind::kBool, .default_value = "false",
                .scope = "launcher",
                .description = "Check every host before its ranks start (and, in elastic jobs, "
                               "before each later rank there): free disk on --health-disk-path, "
                               "the link of --network-interface, NVML's ECC and retired-page "
                               "counters of the GPUs its ranks pin. A failing host is not used "
                               "(docs/elastic.md, Health). --health-check-script implies it."},
    SettingSpec{.name = "health_check_script", .flag = "--health-check-script",
                .env = "HVRUN_HEALTH_CHECK_SCRIPT", .kind = SettingKind::kString,
                .default_value = "", .unit = "program", .scope = "launcher",
                .description = "Run on each host as part of its health check (through /bin/sh "
                               "-c): exit 0 = healthy; otherwise its first line of output is the "
                               "reason given."},
    SettingSpec{.name = "health_check_timeout_s", .flag = "--health-check-timeout",
                .env = "HVRUN_HEALTH_CHECK_TIMEOUT", .kind = SettingKind::kDouble,
                .default_value = "30", .min = 0.1, .max = 3600, .unit = "seconds",
                .scope = "launcher",
                .description = "How long a host's health check (the script included) may take; "
                               "a host that has not answered by then fails it."},
    SettingSpec{.name = "health_min_free_disk_mb", .flag = "--health-min-free-disk",
                .env = "HVRUN_HEALTH_MIN_FREE_DISK", .kind = SettingKind::kInt,
                .default_value = "1024", .min = 0, .max = 1e12, .unit = "MiB",
                .scope = "launcher",
                .description = "The health check's free space needed on --health-disk-path; 0 = "
                               "disk not checked."},
    SettingSpec{.name = "health_disk_path", .flag = "--health-disk-path",
                .env = "HVRUN_HEALTH_DISK_PATH", .kind = SettingKind::kString,
                .default_value = "", .unit = "directory", .scope = "launcher",
                .description = "Where the trainer writes checkpoints and output, for the health "
                               "check's free-disk test; empty = --output-filename's directory, "
                               "else hvrun's working directory."},
    SettingSpec{.name = "spares", .flag = "--spares", .env = "HVRUN_SPARES",
                .kind = SettingKind::kInt, .default_value = "0", .min = 0, .max = 4096,
                .unit = "workers", .scope = "launcher",
                .description = "Elastic jobs (a job with spares is elastic): this many hot "
                               "spares, started with the job, which run the trainer's start-up "
                               "(up to hvd.elastic.run, or elastic::run in C++ and C) and "
                               "park outside the membership; a lost rank's "
                               "place goes to a spare at the next membership, so the world "
                               "size stays, and a spare used is replaced when the discovery "
                               "script offers a slot."},
    SettingSpec{.name = "replace_stragglers", .flag = "--replace-stragglers",
                .env = "HVRUN_REPLACE_STRAGGLERS", .kind = SettingKind::kBool,
                .default_value = "false", .scope = "launcher",
                .description = "Elastic jobs with --spares: a rank that the straggler attribution "
                               "names last by --straggler-replace-ms or more in most of the last "
                               "--straggler-replace-window steps (hvrun::mark_step) is stopped "
                               "and a spare takes its place, saying so; with no spare ready it "
                               "is named and left running."},
    SettingSpec{.name = "straggler_replace_ms", .flag = "--straggler-replace-ms",
                .env = "HVRUN_STRAGGLER_REPLACE_MS", .kind = SettingKind::kDouble,
                .default_value = "50", .min = 0.001, .max = 3600000, .unit = "ms",
                .scope = "coordinator",
                .description = "--replace-stragglers: how late a rank must arrive last in a step "
                               "for the step to count against it."},
    SettingSpec{.name = "straggler_replace_window", .flag = "--straggler-replace-window",
                .env = "HVRUN_STRAGGLER_REPLACE_WINDOW", .kind = SettingKind::kInt,
                .default_value = "20", .min = 2, .max = 2048, .unit = "steps",
                .scope = "coordinator",
                .description = "--replace-stragglers: the last this many attributed steps; a rank "
                               "late in more than half of them is replaced."},
    SettingSpec{.name = "metrics_port", .flag = "--metrics-port", .env = "HVRUN_METRICS_PORT",
                .kind = SettingKind::kInt, .default_value = "-1", .min = -1, .max = 65535,
                .unit = "port", .scope = "coordinator",
                .description = "Serve Prometheus metrics at http://<metrics address>:PORT/metrics "
                               "(hvrun keeps it across restarts; hvrun-coordinator too); 0 picks "
                               "a free port; -1 = off."},
    SettingSpec{.name = "metrics_address", .flag = "--metrics-address",
                .env = "HVRUN_METRICS_ADDRESS", .kind = SettingKind::kString,
                .default_value = "127.0.0.1", .unit = "IP address", .scope = "coordinator",
                .description = "Address /metrics listens on; 0.0.0.0 lets a Prometheus on "
                               "another host scrape it."},
    SettingSpec{.name = "timeline_filename", .flag = "--timeline-filename",
                .env = "HVRUN_TIMELINE_FILENAME", .kind = SettingKind::kString,
                .default_value = "", .unit = "file", .scope = "coordinator",
                .description = "Write the job's timeline (Chrome trace-event JSON for "
                               "chrome://tracing or Perfetto) to this file; empty = off (it can "
                               "still be started at run time from the API)."},
    SettingSpec{.name = "timeline_names", .flag = "--timeline-names",
                .env = "HVRUN_TIMELINE_NAMES", .kind = SettingKind::kChoice,
                .default_value = "hvrun", .choices = "hvrun|horovod", .scope = "coordinator",
                .description = "Names of the timeline's phases: hvrun's (negotiated, queued, pack, "
                               "collective, unpack) or Horovod's (NEGOTIATE_ALLREDUCE, QUEUE, "
                               "MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, ...), for tools written "
                               "for Horovod's timeline."},
    SettingSpec{.name = "straggler_warning_ms", .flag = "--straggler-warning-ms",
                .env = "HVRUN_STRAGGLER_WARNING_MS", .kind = SettingKind::kDouble,
                .default_value = "0", .min = 0, .max = 3600000, .unit = "ms",
                .scope = "coordinator",
                .description = "Log a warning naming the rank, how late it was at the median and "
                               "the phase of its step that grew (hvrun::mark_phase) when one rank "
                               "arrived last by at least this much in half or more of the last "
                               "10 steps (hvrun::mark_step); at most every 10 s per rank. "
                               "0 = off."},
    SettingSpec{.name = "summary", .flag = "--summary", .env = "HVRUN_SUMMARY",
                .kind = SettingKind::kBool, .default_value = "true", .scope = "launcher",
                .description = "After the job, print per rank time in collectives, bytes moved "
                               "and bandwidth, the slowest rank and the longest-waiting tensor "
                               "(when the workers reported telemetry)."},
    SettingSpec{.name = "autopsy", .flag = "--autopsy", .env = "HVRUN_AUTOPSY",
                .kind = SettingKind::kBool, .default_value = "true", .scope = "coordinator",
                .description = "On a stall warning, ask every rank for its flight recorder, "
                               "the collectives it waits in and its threads' stacks, print a "
                               "verdict naming the rank and where it is, and write the report "
                               "(SIGUSR1 to hvrun asks for one at any time); a stall-shutdown or "
                               "heartbeat abort waits for one. false: only SIGUSR1."},
    SettingSpec{.name = "autopsy_deadline_s", .flag = "--autopsy-deadline-seconds",
                .env = "HVRUN_AUTOPSY_DEADLINE_SECONDS", .kind = SettingKind::kDouble,
                .default_value = "3", .min = 0.1, .max = 600, .unit = "seconds",
                .scope = "coordinator",
                .description = "How long an autopsy waits for the ranks' answers; ranks that "
                               "did not answer are named unresponsive, with their process state "
                               "as the kernel shows it."},
    SettingSpec{.name = "autopsy_dir", .flag = "--autopsy-dir", .env = "HVRUN_AUTOPSY_DIR",
                .kind = SettingKind::kString, .default_value = "", .unit = "directory",
                .scope = "coordinator",
                .description = "Where hvrun (or hvrun-coordinator) writes autopsy reports (JSON "
                               "and text); empty: the --output-filename directory, else $TMPDIR "
                               "or /tmp."},
    SettingSpec{.name = "flight_recorder_size", .flag = "--flight-recorder-size",
                .env = "HVRUN_FLIGHT_RECORDER_SIZE", .kind = SettingKind::kInt,
                .default_value = "1024", .min = 0, .max = 1048576, .unit = "collectives",
                .scope = "worker",
                .description = "Each rank keeps its latest this many collectives (name, op, "
                               "bytes, times, state) for autopsies; 0 turns the recorder off."},
    SettingSpec{.name = "checkpoint_dir", .flag = "--checkpoint-dir",
                .env = "HVRUN_CHECKPOINT_DIR", .kind = SettingKind::kString,
                .default_value = "", .unit = "directory", .scope = "worker",
                .description = "Where hvrun::Checkpointer saves and finds checkpoints; empty "
                               "turns checkpoints off."},
    SettingSpec{.name = "checkpoint_every", .flag = "--checkpoint-every",
                .env = "HVRUN_CHECKPOINT_EVERY", .kind = SettingKind::kInt,
                .default_value = "0", .min = 0, .max = 1000000000, .unit = "steps",
                .scope = "worker",
                .description = "Checkpointer::save_if_due(step) saves when step is a multiple "
                               "of this; 0 = never."},
    SettingSpec{.name = "checkpoint_keep", .flag = "--checkpoint-keep",
                .env = "HVRUN_CHECKPOINT_KEEP", .kind = SettingKind::kInt,
                .default_value = "3", .min = 1, .max = 1000000, .unit = "files",
                .scope = "worker",
                .description = "Newest checkpoints kept; older ones are removed after a save."},
    SettingSpec{.name = "checkpoint_name", .flag = "--checkpoint-name",
                .env = "HVRUN_CHECKPOINT_NAME", .kind = SettingKind::kString,
                .default_value = "", .unit = "name", .scope = "worker",
                .description = "Identity of this run's checkpoints (default: the program's file "
                               "name); files saved under another name are not loaded."},
};

}  // namespace

std::span<const SettingSpec> all_settings() { return kCatalog; }

}  // namespace hvrun

# Debian's Docker engine for one test, sourced by the container tests (tests/docker/run_docker_test,
# tests/package/run_wheel_container_test): no networking of its own (no bridge, no iptables),
# its own data and exec roots and socket under the test's scratch folder, stopped by pid.
#
#   source tests/docker/engine.sh
#   docker_engine_start SCRATCH || skip "$docker_engine_error"   # sets docker=(...) and the pid
#   "${docker[@]}" run ...
#   docker_engine_stop                                           # from the test's EXIT trap
#
# Needs root and docker.io; docker_engine_start returns 1 with docker_engine_error set (the reason
# to print when skipping) where no engine can start.

docker_engine_scratch=
docker_engine_pid=
docker_engine_error=
docker=()

docker_engine_start() {
  docker_engine_scratch=${1:?scratch folder}
  if [[ $(id -u) != 0 ]]; then docker_engine_error="needs root (dockerd)"; return 1; fi
  if [[ ! -x /usr/sbin/dockerd || ! -x /usr/bin/docker ]]; then
    docker_engine_error="no Docker engine (install docker.io)"; return 1
  fi
  local sock="$docker_engine_scratch/docker.sock"
  docker=(/usr/bin/docker -H "unix://$sock")
  /usr/sbin/dockerd --bridge=none --iptables=false --ip6tables=false \
    --data-root "$docker_engine_scratch/data" --exec-root "$docker_engine_scratch/exec" \
    --host "unix://$sock" --pidfile "$docker_engine_scratch/docker.pid" \
    > "$docker_engine_scratch/dockerd.log" 2>&1 &
  docker_engine_pid=$!
  for _ in $(seq 300); do "${docker[@]}" info >/dev/null 2>&1 && return 0; sleep 0.1; done
  docker_engine_error="dockerd did not start: $(tail -n 3 "$docker_engine_scratch/dockerd.log" | tr '\n' ' ')"
  return 1
}

# Stops what docker_engine_start started (nothing when it did not run) and unmounts what the
# engine left mounted under the scratch folder; the caller removes the folder.
docker_engine_stop() {
  [[ -n "$docker_engine_scratch" ]] || return 0
  if [[ -n "$docker_engine_pid" ]]; then
    # Containers first: killing dockerd's shims would leave their processes running.
    "${docker[@]}" ps -q 2>/dev/null | xargs -r "${docker[@]}" kill >/dev/null 2>&1
    kill -TERM "$docker_engine_pid" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$docker_engine_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$docker_engine_pid" 2>/dev/null
    # containerd-shims it left, by their exec root
    local pid
    for pid in $(pgrep -f "$docker_engine_scratch/exec" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  fi
  grep " $docker_engine_scratch/" /proc/mounts | awk '{print $2}' | sort -r \
    | while read -r m; do umount -l "$m"; done
}

# docker_import_base TAG [RELEASE PACKAGE...]: a Debian base made by scripts/make-docker-base
# (cached; without RELEASE its default, Debian 12 with hvrun's runtime libraries), imported as
# TAG. Returns make-docker-base's code (77: no base can be made here), its reason on stderr.
docker_import_base() {
  local tag=$1 source_dir tarball code
  shift
  source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  tarball=$("$source_dir/scripts/make-docker-base" "$@") || return
  "${docker[@]}" import "$tarball" "$tag" >/dev/null
}

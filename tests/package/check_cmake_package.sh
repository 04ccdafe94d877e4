#!/usr/bin/env bash
# `cmake --install` into an empty prefix, then a trainer outside the tree (consumer/) finds it with
# find_package(hvrun), builds against hvrun::worker alone (only the installed public headers on
# its include path), links the installed libhvrun.so and runs under the installed hvrun.
#   check_cmake_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
work="$(mktemp -d /tmp/hvrun-package.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
for internal in worker_lib coordinator launcher common; do
  if [ -e "$prefix/include/$internal" ]; then
    echo "FAIL: internal headers installed: $prefix/include/$internal"; exit 1
  fi
done

configure_log="$(cmake -S "$src/tests/package/consumer" -B "$work/consumer" -G Ninja \
                   -DCMAKE_PREFIX_PATH="$prefix" 2>&1)" || { echo "$configure_log"; exit 1; }
if ! grep -qx -- "-- hvrun::worker include directories: $prefix/include" <<<"$configure_log"; then
  echo "FAIL: hvrun::worker should carry only $prefix/include:"; echo "$configure_log"; exit 1
fi
cmake --build "$work/consumer" >/dev/null

status=0
for program in consumer_cpp consumer_c; do
  exe="$work/consumer/$program"
  # A here-string, not a pipe: grep -q stops reading early, which pipefail would count as
  # ldd failing (SIGPIPE).
  if ! grep -q "libhvrun.so.0 => $prefix/lib/libhvrun.so.0" <<<"$(ldd "$exe")"; then
    echo "FAIL: $program does not link the installed libhvrun.so:"; ldd "$exe"; exit 1
  fi
  out="$(HVRUN_DEVICE=cpu timeout 60 "$prefix/bin/hvrun" -np 2 "$exe" 2>&1)" || status=$?
  echo "$out"
  for rank in 0 1; do
    if ! grep -q "rank $rank of 2: allreduce ok" <<<"$out"; then
      echo "FAIL: $program rank $rank did not report its allreduce"; status=1
    fi
  done
done
[ "$status" -eq 0 ] && echo "PASS: find_package(hvrun) -> hvrun::worker, C++ and C trainers ran on 2 ranks"
exit "$status"

#!/usr/bin/env bash
# Builds the trainers of consumer/ against an installed hvrun with find_package(hvrun) and runs
# them on 2 ranks under that installation's launcher, through horovodrun too, and alone (no
# launcher: a job of size 1 with the installation's hvrun-coordinator as its child). Checks that
# hvrun::worker carries only PREFIX/include and that the programs link PREFIX/lib/libhvrun.so.
#   run_consumer.sh PREFIX HVRUN WORK_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="$1" hvrun="$2" work="$3"

configure_log="$(cmake -S "$here/consumer" -B "$work/consumer" -G Ninja \
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
    echo "FAIL: $program does not link $prefix/lib/libhvrun.so:"; ldd "$exe"; exit 1
  fi
  out="$(HVRUN_DEVICE=cpu timeout 60 "$hvrun" -np 2 "$exe" 2>&1)" || status=$?
  echo "$out"
  for rank in 0 1; do
    if ! grep -q "rank $rank of 2: allreduce ok" <<<"$out"; then
      echo "FAIL: $program rank $rank did not report its allreduce"; status=1
    fi
  done
done

# Horovod's name for the same launcher, installed beside it.
out="$(HVRUN_DEVICE=cpu timeout 60 "$(dirname "$hvrun")/horovodrun" -np 2 --gloo \
         "$work/consumer/consumer_cpp" 2>&1)" || status=$?
grep -q "rank 1 of 2: allreduce ok" <<<"$out" || { echo "$out"; echo "FAIL: horovodrun"; status=1; }

# No launcher: each program alone is a job of size 1.
for program in consumer_cpp consumer_c; do
  out="$(env -u HVRUN_COORDINATOR_ADDR -u HVRUN_SECRET timeout 60 "$work/consumer/$program" 2>&1)" \
    || status=$?
  if ! grep -q "rank 0 of 1: allreduce ok" <<<"$out"; then
    echo "$out"; echo "FAIL: $program alone did not run as a job of size 1"; status=1
  fi
done
exit "$status"

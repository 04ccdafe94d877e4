#!/usr/bin/env bash
# `cmake --install` into an empty prefix, then the trainers outside the tree (consumer/) are
# built against it and run under the installed hvrun (run_consumer.sh).
#   check_cmake_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
work="$(mktemp -d /tmp/hvrun-package.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
for internal in worker_lib coordinator launcher common hvrun/common; do
  if [ -e "$prefix/include/$internal" ]; then
    echo "FAIL: internal headers installed: $prefix/include/$internal"; exit 1
  fi
done

"$(dirname "${BASH_SOURCE[0]}")/run_consumer.sh" "$prefix" "$prefix/bin/hvrun" "$work"
echo "PASS: find_package(hvrun) -> hvrun::worker, C++ and C trainers ran on 2 ranks"

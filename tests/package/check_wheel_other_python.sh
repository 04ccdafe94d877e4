#!/bin/bash
# scripts/build-wheel --python VERSION: a wheel for another CPython than this machine's, built by
# that CPython (Debian's, scripts/debian-python). Its tags name that CPython, and its extension
# is built for it alone (no extension of this machine's CPython slipped in). It joins the other
# wheel in WHEELHOUSE, for the container test to install where that CPython is the system's.
#
#   tests/package/check_wheel_other_python.sh SOURCE_DIR DEV_PYTHON WHEELHOUSE VERSION [CMAKE_DEFINE=VALUE...]
#
# Exit 77 (ctest: skipped) where Debian's mirror cannot be reached for that CPython's packages.
set -uo pipefail
src=$1 dev_python=$2 wheelhouse=$3 version=$4
shift 4
fail() { echo "FAIL: $*" >&2; exit 1; }
abi=cp${version/./}
rm -f "$wheelhouse"/hvrun-*-"$abi"-*.whl
wheel=$(HVRUN_PYTHON="$dev_python" "$src/scripts/build-wheel" --python "$version" "$wheelhouse" "$@")
code=$?
[[ $code == 77 ]] && { echo "SKIP: no CPython $version to build with (see above)" >&2; exit 77; }
[[ $code == 0 ]] || fail "scripts/build-wheel --python $version failed ($code)"
echo "$wheel, $(du -k "$wheel" | cut -f1) KiB"
[[ $(basename "$wheel") == hvrun-*-$abi-$abi-manylinux_2_35_x86_64.whl ]] \
  || fail "$wheel: not tagged $abi-$abi-manylinux_2_35_x86_64"
files=$(unzip -Z1 "$wheel") || fail "cannot list $wheel"
grep -qx "hvrun/_core.cpython-${version/./}-x86_64-linux-gnu.so" <<<"$files" \
  || fail "no hvrun/_core built for CPython $version in $wheel: $(grep _core <<<"$files")"
others=$(grep -E '\.cpython-[0-9]+-' <<<"$files" | grep -v "\.cpython-${version/./}-" || true)
[[ -z "$others" ]] || fail "extensions for another CPython in $wheel: $others"
echo "PASS"

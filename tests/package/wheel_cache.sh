# The pinned wheels of hvrun's dependencies for a container's CPython, sourced by the tests that
# install hvrun's wheel in containers (run_wheel_container_test, run_dockerfile_test): taken from
# the wheel cache (~/.cache/hvrun/wheels, which scripts/install-python-env fills), downloaded into
# it once where missing. Needs SOURCE_DIR's python/requirements-dev.txt for the pins and fail().
#
#   source tests/package/wheel_cache.sh
#   wheel_cache_init SOURCE_DIR SCRATCH         # sets wheel_cache (the cache folder)
#   cached_wheel numpy 3.11 DEST_DIR            # copies numpy's pinned cp311 wheel into DEST_DIR

wheel_cache=
wheel_cache_source=
wheel_cache_scratch=

wheel_cache_init() {
  wheel_cache_source=${1:?source dir}
  wheel_cache_scratch=${2:?scratch dir}
  wheel_cache=${HVRUN_CACHE_DIR:-$HOME/.cache/hvrun}/wheels
  mkdir -p "$wheel_cache"
}

pin() { sed -n "s/^$1==//p" "$wheel_cache_source/python/requirements-dev.txt"; }

cached_wheel() {  # cached_wheel NAME PYTHON_VERSION (3.11) DEST_DIR
  local name=$1 version abi=cp${2/./} dest=$3 nullglob
  version=$(pin "$1")
  nullglob=$(shopt -p nullglob)  # a pattern that matches nothing expands to nothing, here only
  shopt -s nullglob
  local found=("$wheel_cache/$name-$version"-*{$abi-$abi-*manylinux*x86_64,py3-none-any}.whl)
  if [[ ${#found[@]} == 0 ]]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$2" \
      --platform manylinux_2_28_x86_64 -d "$wheel_cache" "$name==$version" \
      >"$wheel_cache_scratch/pip.log" 2>&1 \
      || fail "cannot download $name==$version: $(tail -n 3 "$wheel_cache_scratch/pip.log")"
    found=("$wheel_cache/$name-$version"-*{$abi-$abi-*manylinux*x86_64,py3-none-any}.whl)
    [[ ${#found[@]} != 0 ]] || fail "pip download put no $name==$version wheel for $abi in $wheel_cache"
  fi
  eval "$nullglob"
  cp "${found[0]}" "$dest/" || fail "cannot copy ${found[0]} to $dest"
}

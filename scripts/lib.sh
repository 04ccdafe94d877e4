# Shared by scripts/demo and scripts/test: install what is missing, configure and build.
# Sourced, not run. Honours BUILD_DIR (default: build), HVRUN_WITH_CUDA (default: AUTO),
# HVRUN_WERROR (default: ON under CI), JOBS (default: nproc).

HVRUN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$HVRUN_ROOT/build}"
HVRUN_VENV="${HVRUN_VENV:-$HVRUN_ROOT/.venv}"
export HVRUN_VENV

hvrun_say() { printf '==> %s\n' "$*" >&2; }

# hvrun_setup [TARGET...]: install, configure, then build the named targets (all without any).
hvrun_setup() {
  "$HVRUN_ROOT/scripts/install-deps"
  local werror="${HVRUN_WERROR:-OFF}"
  [ "${CI:-}" = "true" ] && werror="${HVRUN_WERROR:-ON}"
  local launcher=()
  if command -v ccache >/dev/null; then
    # Paths under the clone are hashed relative to it, so another clone reuses the cache.
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$HVRUN_ROOT}"
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  # A build folder made for another interpreter (an older checkout's /usr/bin/python3) is
  # configured again for the project's environment.
  local cached_python=""
  [ -f "$BUILD_DIR/CMakeCache.txt" ] &&
    cached_python="$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
  if [ ! -f "$BUILD_DIR/build.ninja" ] || [ "$cached_python" != "$HVRUN_VENV/bin/python" ]; then
    hvrun_say "configuring $BUILD_DIR (Release, CUDA=${HVRUN_WITH_CUDA:-AUTO}, Werror=$werror, Python=$HVRUN_VENV/bin/python)"
    cmake -S "$HVRUN_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DHVRUN_WITH_CUDA="${HVRUN_WITH_CUDA:-AUTO}" -DHVRUN_WERROR="$werror" \
      -DPython_EXECUTABLE="$HVRUN_VENV/bin/python" -Upybind11_DIR "${launcher[@]}" >/dev/null
  fi
  hvrun_say "building ${*:-everything} in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --parallel "${JOBS:-$(nproc)}" ${1:+--target "$@"}
}

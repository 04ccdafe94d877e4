# Shared by scripts/demo and scripts/test: install what is missing, configure and build.
# Sourced, not run. Honours BUILD_DIR (default: build), HVRUN_WITH_CUDA (default: AUTO),
# HVRUN_WERROR (default: ON under CI), JOBS (default: nproc).

HVRUN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$HVRUN_ROOT/build}"

hvrun_say() { printf '==> %s\n' "$*" >&2; }

hvrun_setup() {
  "$HVRUN_ROOT/scripts/install-deps"
  local werror="${HVRUN_WERROR:-OFF}"
  [ "${CI:-}" = "true" ] && werror="${HVRUN_WERROR:-ON}"
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    hvrun_say "configuring $BUILD_DIR (Release, CUDA=${HVRUN_WITH_CUDA:-AUTO}, Werror=$werror)"
    cmake -S "$HVRUN_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DHVRUN_WITH_CUDA="${HVRUN_WITH_CUDA:-AUTO}" -DHVRUN_WERROR="$werror" >/dev/null
  fi
  hvrun_say "building in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --parallel "${JOBS:-$(nproc)}"
}

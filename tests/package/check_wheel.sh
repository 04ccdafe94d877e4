#!/usr/bin/env bash
# hvrun's wheel as a user gets it: scripts/build-wheel (`pip wheel`, then `auditwheel repair`:
# the libraries that are not part of the manylinux platform bundled, tag manylinux_2_35), then
# installed into a new virtual environment and run from there (outside the source tree): the
# launcher, a PyTorch trainer, and a C++ and a C trainer built with find_package(hvrun) against
# the wheel's CMake package.
#   check_wheel.sh SOURCE_DIR DEV_PYTHON WHEELHOUSE [CMAKE_DEFINE=VALUE...]
# DEV_PYTHON is the project's environment (.venv). The new environment sees its packages through
# a .pth file (PyTorch, NumPy and the build backend, instead of downloading gigabytes again) but
# not hvrun, which it gets only from the wheel; that is checked below. The repaired wheel is left
# in WHEELHOUSE (emptied first) for the container test. The CMAKE_DEFINE=VALUE arguments go to
# the wheel's CMake (the test passes the build's compiler, launcher and warning flags, so that
# ccache can reuse the build's objects).
set -euo pipefail
src="$1" dev_python="$2" wheelhouse="$3"
shift 3
work="$(mktemp -d /tmp/hvrun-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if "$dev_python" -c "import hvrun" 2>/dev/null; then
  fail "hvrun is importable from $dev_python without the wheel; this test would prove nothing"
fi
base_python="$("$dev_python" -c 'import sys; print(sys._base_executable)')"
"$base_python" -m venv "$work/venv"
venv="$work/venv"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
"$dev_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' > "$site/hvrun-test-deps.pth"

start=$(date +%s)
rm -rf "$wheelhouse"
wheel="$(HVRUN_PYTHON="$dev_python" "$src/scripts/build-wheel" "$wheelhouse" "$@")"
echo "built and repaired in $(( $(date +%s) - start )) s: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
case "$(basename "$wheel")" in
  hvrun-0.1.0-cp3*-cp3*-manylinux_2_35_x86_64.whl) ;;
  *) fail "not a manylinux_2_35_x86_64 wheel: $(basename "$wheel")";;
esac
contents="$(unzip -Z1 "$wheel")"
for want in hvrun/__init__.py hvrun/torch/__init__.py hvrun/lib/libhvrun.so.0 \
            hvrun/include/hvrun/hvrun.h hvrun/include/hvrun/status.h \
            hvrun/lib/cmake/hvrun/hvrunConfig.cmake hvrun-0.1.0.data/scripts/hvrun \
            hvrun-0.1.0.data/scripts/hvrun-coordinator hvrun-0.1.0.data/scripts/horovodrun; do
  grep -qx "$want" <<<"$contents" || fail "the wheel lacks $want"
done
grep -q '^hvrun/_core\..*\.so$' <<<"$contents" || fail "the wheel lacks the extension hvrun/_core"
grep -qx hvrun/examples/train <<<"$contents" || fail "the wheel lacks the example trainer"
# The libraries that Debian 12 has and another Linux may not are in the wheel; the frameworks'
# and NVIDIA's are not (they come with PyTorch, TensorFlow or the system).
for bundled in libgrpc++ libprotobuf libgloo libspdlog libfmt; do
  grep -q "^hvrun.libs/$bundled" <<<"$contents" || fail "the wheel does not bundle $bundled"
done
if grep -E '^hvrun.libs/lib(torch|c10|tensorflow|nccl|cudart|cuda)[._-]' <<<"$contents"; then
  fail "the wheel bundles a framework's or NVIDIA's library (above)"
fi
with_tensorflow=no
if TF_CPP_MIN_LOG_LEVEL=3 "$dev_python" -c "import tensorflow" 2>/dev/null; then
  with_tensorflow=yes  # HVRUN_WITH_TENSORFLOW=AUTO found it: the op library is in the wheel
  grep -qx hvrun/tensorflow/_hvrun_tf_ops.so <<<"$contents" \
    || fail "the wheel lacks hvrun.tensorflow's op library hvrun/tensorflow/_hvrun_tf_ops.so"
fi
"$venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
# Every shared library the installed programs need is found, and hvrun's dependencies in the
# wheel, not on this machine. (auditwheel moves the programs into hvrun.scripts/ and leaves in
# bin/ a Python script that execs them.)
for elf in "$site/hvrun.scripts/hvrun" "$site/hvrun.scripts/hvrun-coordinator" \
           "$site/hvrun/examples/train"; do
  needs="$(ldd "$elf")"
  ! grep -q "not found" <<<"$needs" || fail "$elf: $needs"
  outside="$(awk '/=>/ {print $3}' <<<"$needs" | grep -v "^$venv/" \
             | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libz|libresolv|libutil|libcrypt)\.so' \
             || true)"  # the manylinux platform's libraries (auditwheel's policy) may come from the system
  [ -z "$outside" ] || fail "$elf loads from this machine, not from the wheel: $outside"
done
# Read whole before matching: under pipefail, `ldd | grep -q` fails when grep stops at the first
# match and ldd is still writing (SIGPIPE).
coordinator_needs="$(ldd "$site/hvrun.scripts/hvrun-coordinator")"
grep -q "libgrpc++.*=> $site/.*hvrun.libs/" <<<"$coordinator_needs" \
  || fail "hvrun-coordinator does not load gRPC from the wheel"

cd "$work"  # nothing of the source tree on sys.path
export PATH="$venv/bin:$PATH" HVRUN_DEVICE=cpu
where="$(python -c 'import hvrun, hvrun.torch; print(hvrun.__file__)')"
case "$where" in "$venv"/*) ;; *) fail "hvrun imported from $where, not from the wheel";; esac
[ "$(command -v hvrun)" = "$venv/bin/hvrun" ] || fail "hvrun is not the wheel's: $(command -v hvrun)"
hvrun-coordinator --help >/dev/null || fail "hvrun-coordinator --help"
horovodrun_version="$(horovodrun --version)"
grep -q '^hvrun ' <<<"$horovodrun_version" || fail "horovodrun --version does not run the wheel's hvrun"

echo "==> hvrun -np 2 -H localhost:2 python examples/pytorch_synthetic.py"
out="$(timeout 180 hvrun -np 2 -H localhost:2 python "$src/examples/pytorch_synthetic.py" --epochs 1 \
         --train-samples 64 --batch-size 16 --num-warmup-batches 1 --num-batches-per-iter 2 \
         --num-iters 2 2>&1)" || { echo "$out"; fail "the PyTorch example failed"; }
grep "Total img/sec on 2 rank" <<<"$out" || { echo "$out"; fail "no img/sec total"; }

if [ "$with_tensorflow" = yes ]; then
  echo "==> hvrun -np 2 python: an allreduce through hvrun.tensorflow's op library from the wheel"
  out="$(TF_CPP_MIN_LOG_LEVEL=2 timeout 180 hvrun -np 2 python -c 'import tensorflow as tf
import hvrun.tensorflow as hvd
hvd.init()
print("tensorflow sum", float(hvd.allreduce(tf.ones([2]), op=hvd.Sum)[0]))' 2>&1)" \
    || { echo "$out"; fail "hvrun.tensorflow from the wheel failed"; }
  [ "$(grep -c 'tensorflow sum 2.0' <<<"$out")" = 2 ] || { echo "$out"; fail "no TensorFlow sum"; }
fi

echo "==> find_package(hvrun) from the wheel (hvrun.cmake_prefix_path)"
prefix="$(python -c 'import hvrun; print(hvrun.cmake_prefix_path)')"
"$src/tests/package/run_consumer.sh" "$prefix" "$venv/bin/hvrun" "$work" || fail "the consumer trainers"
echo "PASS: the wheel installs hvrun, hvrun-coordinator, libhvrun.so, headers, CMake package and hvrun.torch"

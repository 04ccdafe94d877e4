#include "worker_lib/backends/shm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "worker_lib/half.h"

namespace hvrun::detail::shm {
namespace generic {
#include "worker_lib/backends/shm/reduce_kernels_impl.inc"
}  // namespace generic

#if defined(__x86_64__) && defined(__GNUC__)
// The same kernels for AVX2. A target pragma (not -mavx2 on the file) keeps every inline function
// from headers (half.h, <algorithm>) compiled for the baseline: only these functions use AVX2,
// and they run only after the CPU check below.
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "worker_lib/backends/shm/reduce_kernels_impl.inc"
}  // namespace avx2
#pragma GCC pop_options
#define HVRUN_SHM_HAVE_AVX2 1
#endif

namespace {
using ReduceFn = void (*)(void*, void*, const void* const*, int, size_t, DataType, ReduceOp);
using FinishFn = void (*)(void*, void*, const void* const*, int, size_t, DataType, ReduceOp, int,
                          double);

bool have_avx2() {
#ifdef HVRUN_SHM_HAVE_AVX2
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

ReduceFn pick() {
#ifdef HVRUN_SHM_HAVE_AVX2
  if (have_avx2()) return &avx2::reduce;
#endif
  return &generic::reduce;
}

FinishFn pick_finish() {
#ifdef HVRUN_SHM_HAVE_AVX2
  if (have_avx2()) return &avx2::reduce_finish;
#endif
  return &generic::reduce_finish;
}
}  // namespace

void reduce_sources(void* out, const void* const* sources, int n, size_t count, DataType dtype,
                    ReduceOp op, void* copy) {
  static const ReduceFn fn = pick();
  if (count == 0 || n <= 0) return;
  fn(out, copy, sources, n, count, dtype, op);
}

void reduce_sources_finished(void* out, void* copy, const void* const* sources, int n,
                             size_t count, DataType dtype, ReduceOp op, int divisor,
                             double postscale) {
  static const FinishFn fn = pick_finish();
  if (count == 0 || n <= 0 || (out == nullptr && copy == nullptr)) return;
  fn(out, copy, sources, n, count, dtype, op, divisor, postscale);
}

}  // namespace hvrun::detail::shm

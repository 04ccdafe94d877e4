// The gradient bench's float buffers (tensors and references alike). By default plain heap
// memory, as a C++ trainer's std::vector holds it; with huge_pages() on, each buffer of 2 MiB or
// more on transparent huge pages (2 MiB-aligned, madvise(MADV_HUGEPAGE)): where a buffer's 4 KiB
// pages land moves a pass over it by several percent on some machines, so the step and its
// references compare better on the same kind of pages (bench/RESULTS.md, sections 31 and 33).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

namespace hvrun::bench {

inline bool& huge_pages() {
  static bool on = false;
  return on;
}

// The kernel's transparent-huge-page mode ("always", "madvise", "never"), or "" when unknown.
inline std::string transparent_huge_pages_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(in, text);
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close < open ? "" : text.substr(open + 1, close - open - 1);
}

template <typename T>
struct BufferAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  BufferAllocator() = default;
  template <typename U>
  BufferAllocator(const BufferAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (!huge_pages() || bytes < kHugePage) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP the pages stay 4 KiB
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (!huge_pages() || n * sizeof(T) < kHugePage) ::operator delete(p);
    else std::free(p);
  }
  template <typename U>
  bool operator==(const BufferAllocator<U>&) const { return true; }
};

using Floats = std::vector<float, BufferAllocator<float>>;

}  // namespace hvrun::bench

#include "tests/support/worker_checks.h"

#include <atomic>
#include <cstdio>

namespace hvrun::test {
namespace {

std::atomic<int> failed_checks{0};

}  // namespace

void fail(const std::string& what) {
  if (++failed_checks <= 10) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

int failures() { return failed_checks.load(); }

std::unique_ptr<Worker> init_or_report() {
  auto worker = Worker::init();
  if (worker.is_ok()) return std::move(worker).value();
  std::fprintf(stderr, "init failed: %s\n", worker.status().to_string().c_str());
  return nullptr;
}

}  // namespace hvrun::test

// What the test workers (one rank of a test job, on the public worker API) share: a count of
// failed checks with their messages on stderr, and init() that says why it failed.
#pragma once

#include <memory>
#include <string>

#include "hvrun/hvrun.h"

namespace hvrun::test {

// Counts a failed check and prints "FAIL: what" on stderr; past the first 10 it only counts (a
// check failing in a loop must not bury the first message). Any thread.
void fail(const std::string& what);

// How many checks failed so far in this process.
int failures();

// Worker::init(); when it fails, prints "init failed: STATUS" on stderr and returns null (the
// worker then exits 2).
std::unique_ptr<Worker> init_or_report();

}  // namespace hvrun::test

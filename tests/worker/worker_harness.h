// The worker job harness moved to tests/support/worker_job.h (it serves tests/faults too);
// fast_path_test.cc still includes it by this path.
#pragma once

#include "tests/support/worker_job.h"

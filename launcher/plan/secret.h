// Random tokens from the kernel's generator: the per-job secret (passed to workers only through
// the environment, never on argv, never logged) and the job id.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace hvrun::launcher {

// `bytes` random bytes from /dev/urandom, as lowercase hex.
Result<std::string> random_hex(size_t bytes);

}  // namespace hvrun::launcher

// Sizes on the command line and in reports: "300M" parameters, "24GB" / "24GiB" of memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hvrun::estimate {

// A count with an optional SI suffix: "335M", "7B", "1.5k", "124439808". K/k = 1e3, M = 1e6,
// B/G = 1e9, T = 1e12 (B as in "7B parameters").
Result<double> parse_count(std::string_view text);

// Bytes: "24GB" (1e9), "24GiB" (2^30), "512MB", "512MiB", "80G" (= GB), plain "1000000".
Result<double> parse_bytes(std::string_view text);

// "1.34 GB" (decimal units, as the memory formulas' sources quote them), "512 MB", "0 B".
std::string format_bytes(double bytes);

// "335.1 M", "6.74 B", "124.4 M".
std::string format_count(double count);

}  // namespace hvrun::estimate

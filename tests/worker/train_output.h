// Reading examples/train's output in tests: the loss rank 0 prints per epoch.
#pragma once

#include <regex>
#include <string>
#include <vector>

namespace hvrun::test {

// The losses of every "epoch N loss X" line, in order.
inline std::vector<double> epoch_losses(const std::string& out) {
  std::vector<double> losses;
  static const std::regex line(R"(epoch (\d+) loss ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    losses.push_back(std::stod((*it)[2]));
  return losses;
}

}  // namespace hvrun::test

// Reading examples/train's output in tests: the loss rank 0 prints per epoch, and the line each
// rank prints when its weights match every other rank's.
#pragma once

#include <gtest/gtest.h>

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

// A job of `ranks` ranks trained `epochs` epochs: the loss fell, and every rank ended with the
// same weights as the others. `tag_prefix` is what precedes a rank number in the launcher's tag
// of its lines ("[" for hvrun's "[R]<stdout>:", "[1," for mpirun's "[1,R]<stdout>:").
inline void expect_trained_alike(const std::string& out, int ranks, size_t epochs,
                                 const std::string& tag_prefix = "[") {
  std::vector<double> losses = epoch_losses(out);
  ASSERT_EQ(losses.size(), epochs) << out;
  EXPECT_LT(losses.back(), losses.front()) << out;
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_NE(out.find(tag_prefix + std::to_string(rank) + "]<stdout>:rank " +
                       std::to_string(rank) + ": weights identical on all " +
                       std::to_string(ranks) + " ranks"),
              std::string::npos)
        << out;
}

}  // namespace hvrun::test

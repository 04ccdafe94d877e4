// The benchmark parameter files (bench/data/resnet50_params.txt): one tensor per line,
// "name 64x3x7x7". Every C++ benchmark reads them through here.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace hvrun::bench {

struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// nullopt when the file cannot be opened; the caller says what to pass instead.
inline std::optional<std::vector<ParamShape>> read_param_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<ParamShape> params;
  for (std::string name, dims; in >> name >> dims;) {
    ParamShape p{name, {}};
    std::stringstream parts(dims);
    for (std::string d; std::getline(parts, d, 'x');) p.shape.push_back(std::stoll(d));
    params.push_back(std::move(p));
  }
  return params;
}

}  // namespace hvrun::bench

// A fresh directory for one test (mkdtemp under the system's temporary directory), removed with
// everything in it when the object goes, on every way out of the test.
#pragma once

#include <string>

namespace hvrun::test {

class TempDir {
 public:
  // <tmp>/hvrun-<name>-XXXXXX; throws std::runtime_error when it cannot be made.
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hvrun::test

// /dev/shm as the shared-memory tests see it.
#pragma once

#include <dirent.h>

#include <string>
#include <vector>

namespace hvrun::test {

// Files under /dev/shm whose name starts with `prefix`.
inline std::vector<std::string> shm_files_named(const std::string& prefix) {
  std::vector<std::string> found;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
    ::closedir(dir);
  }
  return found;
}

}  // namespace hvrun::test

// A directory of its own for a test process (ctest runs test cases in parallel processes),
// removed when the process exits.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace quench::testing_support {

// <tmp>/<prefix>_<pid>/<name>, created empty.
inline std::string scratch_dir(const std::string& prefix, const std::string& name) {
  namespace fs = std::filesystem;
  static const struct Root {
    fs::path path;
    ~Root() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } root{fs::temp_directory_path() / (prefix + "_" + std::to_string(getpid()))};
  const fs::path dir = root.path / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace quench::testing_support

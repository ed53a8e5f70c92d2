// Files for tests of programs: a scratch directory that goes away with the test, and a whole file
// read back as text.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace cuvmm::test {

/// A fresh directory under the system's temporary directory, named `prefix` and this process's id,
/// removed (with everything in it) when the object goes.
struct TempDir {
  explicit TempDir(std::string_view prefix)
      : path(std::filesystem::temp_directory_path() / (std::string(prefix) + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

/// The whole of `path` as text (empty when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace cuvmm::test

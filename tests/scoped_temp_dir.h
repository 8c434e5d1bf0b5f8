// A temporary directory for one test: under the system's temp directory, named for the test and the
// process, empty when made and removed with everything in it when the scope ends.
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

namespace lj::testing {

class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& stem)
      : path_(std::filesystem::temp_directory_path() / fmt::format("lj-{}-{}-{}", stem, ::getpid(), counter()++)) {
    std::filesystem::remove_all(path_);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

}  // namespace lj::testing

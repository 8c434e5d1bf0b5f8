// A temporary directory for one test's model, removed when the test ends.
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

namespace lj::testing {

class TempModelDir {
 public:
  explicit TempModelDir(const std::string& stem)
      : path_(std::filesystem::temp_directory_path() / fmt::format("lj-model-{}-{}-{}", stem, ::getpid(), counter()++)) {
    std::filesystem::remove_all(path_);
  }
  ~TempModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempModelDir(const TempModelDir&) = delete;
  TempModelDir& operator=(const TempModelDir&) = delete;
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

// check_error: the driver of the error-case suite. Parses one .lj input that must fail and compares
// the full diagnostic (format_diagnostic) with NAME.expected, byte for byte. The input is parsed
// under its base name, so expectations do not depend on where the tree is checked out.
//
//   check_error INPUT.lj EXPECTED   exit 0 iff INPUT fails to parse with exactly EXPECTED's text
//   check_error --print INPUT.lj    print the diagnostic (to write a new .expected; review it first)
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "layerjit/text.h"

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Both texts line by line with the first differing line marked, so a failure reads like a diff.
void print_mismatch(const std::string& expected, const std::string& actual) {
  const auto want = split_lines(expected);
  const auto got = split_lines(actual);
  std::fprintf(stderr, "--- expected\n+++ actual\n");
  const size_t n = std::max(want.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    const bool has_w = i < want.size();
    const bool has_g = i < got.size();
    if (has_w && has_g && want[i] == got[i]) {
      std::fprintf(stderr, " %s\n", want[i].c_str());
      continue;
    }
    if (has_w) std::fprintf(stderr, "-%s\n", want[i].c_str());
    if (has_g) std::fprintf(stderr, "+%s\n", got[i].c_str());
  }
  if (expected.size() != actual.size() && want == got)
    std::fprintf(stderr, "(the texts differ only in line endings or a trailing newline)\n");
}

// The diagnostic for `path`, or nullopt (after saying so) when it parses or fails in another way.
std::optional<std::string> diagnose(const std::string& path) {
  const auto text = read_file(path);
  if (!text) {
    std::fprintf(stderr, "check_error: cannot read %s\n", path.c_str());
    return std::nullopt;
  }
  const std::string name = std::filesystem::path(path).filename().string();
  try {
    const lj::Module m = lj::parse_module(*text, name);
    std::fprintf(stderr, "FAIL: %s parsed without error (%zu graph%s); it must fail\n", name.c_str(), m.graphs.size(),
                 m.graphs.size() == 1 ? "" : "s");
  } catch (const lj::UserError& e) {
    return lj::format_diagnostic(e, *text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s threw a non-user error: %s\n", name.c_str(), e.what());
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--print") {
    const auto diag = diagnose(argv[2]);
    if (!diag) return 1;
    std::fputs(diag->c_str(), stdout);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_error INPUT.lj EXPECTED | check_error --print INPUT.lj\n");
    return 2;
  }
  const auto expected = read_file(argv[2]);
  if (!expected) {
    std::fprintf(stderr, "check_error: cannot read expectation %s\n", argv[2]);
    return 1;
  }
  const auto actual = diagnose(argv[1]);
  if (!actual) {
    std::fprintf(stderr, "expected diagnostic:\n%s", expected->c_str());
    return 1;
  }
  if (*actual != *expected) {
    std::fprintf(stderr, "FAIL: diagnostic for %s differs from %s\n", argv[1], argv[2]);
    print_mismatch(*expected, *actual);
    return 1;
  }
  return 0;
}

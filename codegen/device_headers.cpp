#include "codegen/device_headers.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj {

int override_device_headers(DeviceHeaders& base, const std::string& dir, std::string* error) {
  int replaced = 0;
  for (auto& [name, text] : base) {
    const std::filesystem::path file = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      if (error) *error = "cannot read " + file.string();
      continue;
    }
    std::ostringstream body;
    body << in.rdbuf();
    text = body.str();
    ++replaced;
  }
  return replaced;
}

const DeviceHeaders& codegen_device_headers() {
  static const DeviceHeaders headers = [] {
    DeviceHeaders h = embedded_codegen_device_headers();
    const char* dir = std::getenv("LAYERJIT_DEVICE_HEADERS");
    if (dir && *dir) {
      // A misspelt directory must not measure the built-in headers while the user believes otherwise.
      std::string error;
      const int n = override_device_headers(h, dir, &error);
      if (!error.empty()) throw UserError(fmt::format("LAYERJIT_DEVICE_HEADERS: {}", error));
      if (n == 0)
        throw UserError(fmt::format("LAYERJIT_DEVICE_HEADERS={}: no file there replaces a built-in device header (expected e.g. "
                                    "{}/layerjit/gemm.cuh); unset it to use the built-in ones",
                                    dir, dir));
      std::fprintf(stderr, "layerjit: %d device header(s) from %s replace the built-in ones\n", n, dir);
    }
    return h;
  }();
  return headers;
}

}  // namespace lj

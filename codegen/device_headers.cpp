#include "codegen/device_headers.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lj {

int override_device_headers(DeviceHeaders& base, const std::string& dir, std::string* error) {
  int replaced = 0;
  for (auto& [name, text] : base) {
    const std::filesystem::path file = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    std::ifstream in(file, std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    if (!in.good() && !in.eof()) {
      if (error) *error = "cannot read " + file.string();
      continue;
    }
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
      std::string error;
      const int n = override_device_headers(h, dir, &error);
      if (!error.empty()) std::fprintf(stderr, "layerjit: LAYERJIT_DEVICE_HEADERS: %s\n", error.c_str());
      if (n == 0)
        std::fprintf(stderr, "layerjit: LAYERJIT_DEVICE_HEADERS=%s holds no layerjit/*.cuh to replace; using the built-in headers\n", dir);
      else
        std::fprintf(stderr, "layerjit: %d device header(s) from %s replace the built-in ones\n", n, dir);
    }
    return h;
  }();
  return headers;
}

}  // namespace lj

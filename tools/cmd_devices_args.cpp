// Adapts `layerjit devices` (tools/cmd_devices.cpp, argc/argv style) to the CLI's command table.
#include <string>
#include <vector>

#include "tools/cmd_devices.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kDevicesUsage = "usage: layerjit devices\n\nLists the CUDA devices and the NVRTC target layerjit compiles for on each.\n";

int cmd_devices_args(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"devices"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  return cmd_devices(static_cast<int>(argv.size()), argv.data());
}

}  // namespace lj::cli

// Adapts `layerjit devices` (tools/cmd_devices.cpp, argc/argv style) to the CLI's command table.
#include <string>
#include <vector>

#include "tools/args.h"
#include "tools/cmd_devices.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kDevicesUsage = "usage: layerjit devices\n\nLists the CUDA devices and the NVRTC target layerjit compiles for on each.\n";

int cmd_devices_args(const std::vector<std::string>& args) {
  CommandLine cl("devices", kDevicesUsage);
  if (!cl.parse(args)) return kExitOk;
  std::string name = "devices";
  char* argv[] = {name.data()};
  return cmd_devices(1, argv);
}

}  // namespace lj::cli

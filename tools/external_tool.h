// Programs layerjit's CLI hands work to when they are installed: Graphviz's dot for plan pictures,
// the CUDA toolkit's cuobjdump or nvdisasm for SASS. Found on PATH (and for the toolkit's, in
// $CUDA_HOME/bin and /usr/local/cuda/bin); never required for anything else.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lj::cli {

/// The path of the executable `name`: PATH first, then `extra_dirs` in order.
std::optional<std::string> find_tool(const std::string& name, const std::vector<std::string>& extra_dirs = {});

/// The CUDA toolkit's bin directories after PATH: $CUDA_HOME/bin, /usr/local/cuda/bin.
std::vector<std::string> cuda_bin_dirs();

struct ToolRun {
  int exit_code = -1;  // -1: it could not be started or was killed by a signal
  std::string output;  // its stdout
  std::string errors;  // its stderr
};

/// Runs `tool args... FILE` where FILE holds `input` (temporary files, removed afterwards).
ToolRun run_tool_on(const std::string& tool, const std::vector<std::string>& args, const std::string& input);

}  // namespace lj::cli

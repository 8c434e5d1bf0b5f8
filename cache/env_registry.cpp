// The registry of code-changing environment variables (see env_registry.h). Keep kVars sorted by
// name; a unit test checks the order, since the key encodes the variables in this order.
#include "cache/env_registry.h"

#include <array>
#include <cstdlib>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::cache {

namespace {

// Empty today: no stage reads an environment variable that changes generated code. The variables
// that exist (LAYERJIT_COMPILE_JOBS, LAYERJIT_COMPILE_WORKER, LAYERJIT_COMPILE_TIMEOUT, LAYERJIT_LIBCUDA,
// LAYERJIT_SYNC_LAUNCHES) change how many compiles run
// at once, which libcuda is loaded and how launches synchronise, never the bytes NVRTC produces, so
// they are deliberately absent. A codegen or NVRTC knob read from the environment gets a row here
// (name, what it changes) and is read with code_env(); the key picks it up with no other change.
constexpr std::array<CodeEnvVar, 0> kVars{};

}  // namespace

std::span<const CodeEnvVar> code_env_vars() { return kVars; }

std::vector<EnvSetting> capture_code_env() {
  std::vector<EnvSetting> out;
  out.reserve(kVars.size());
  for (const CodeEnvVar& v : kVars) {
    std::string name(v.name);
    const char* value = std::getenv(name.c_str());
    out.push_back({name, value ? std::optional<std::string>(value) : std::nullopt});
  }
  return out;
}

std::optional<std::string> code_env(std::string_view name) {
  for (const CodeEnvVar& v : kVars) {
    if (v.name != name) continue;
    const char* value = std::getenv(std::string(name).c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  }
  LJ_ASSERT(false, "environment variable {} changes generated code but is not in cache/env_registry.cpp", name);
  return std::nullopt;
}

}  // namespace lj::cache

// The one registry of environment variables that change generated code or its compilation. Every
// such variable is part of every cache key (through capture_code_env()), so flipping one can never
// load a kernel built under the other setting. Code that reads such a variable reads it through
// code_env(), which refuses a name missing from the registry: a new variable cannot silently bypass
// the key.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lj::cache {

struct CodeEnvVar {
  std::string_view name;
  std::string_view why;  ///< what it changes in the generated code, for docs and `cache show`
};

/// Every registered variable, sorted by name (the key encodes them in this order).
std::span<const CodeEnvVar> code_env_vars();

/// One variable's value at capture time; unset is distinct from set-to-empty.
struct EnvSetting {
  std::string name;
  std::optional<std::string> value;
  bool operator==(const EnvSetting&) const = default;
};

/// The current value of every registered variable, in registry order.
std::vector<EnvSetting> capture_code_env();

/// Reads a registered variable. Reading an unregistered name is an internal error: it would change
/// generated code without changing the key.
std::optional<std::string> code_env(std::string_view name);

}  // namespace lj::cache

// `layerjit cache stats|ls|show KEY|clear|prune`: inspect and maintain the kernel cache and the
// tuning database (cache/).
#pragma once

#include <string>
#include <vector>

#include "tools/cli.h"

namespace lj::cli {

extern const char* const kCacheUsage;

int cmd_cache(const std::vector<std::string>& args);

}  // namespace lj::cli

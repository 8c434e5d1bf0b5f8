// The CLI subcommands: one function each, taking the arguments after the command name.
#pragma once

#include <string>
#include <vector>

#include "tools/cli.h"

namespace lj::cli {

extern const char* const kCheckUsage;
extern const char* const kPrintUsage;
extern const char* const kPlanUsage;
extern const char* const kInspectUsage;

int cmd_check(const std::vector<std::string>& args);
int cmd_print(const std::vector<std::string>& args);
int cmd_plan(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);

}  // namespace lj::cli

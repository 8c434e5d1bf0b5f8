// Debug output chosen by the environment, from any command or library call:
//   LAYERJIT_DUMP=ir,fusion,source,ptx|all   pipeline stages, to stderr under `== LAYERJIT_DUMP <stage>: <what> ==`
//   LAYERJIT_DUMP_DIR=DIR                    the same stages as files instead (all of them when
//                                            LAYERJIT_DUMP is unset): DIR/<stage>/<what>.<ext>
//   LAYERJIT_LOG=dispatch,compile,cache,tune|all   one line per event on stderr, `layerjit <category>: ...`
// `help` as either variable's value prints what they take. An unknown name is an error: a misspelt
// stage would otherwise dump nothing and look like a quiet run.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lj {

enum class DumpStage { Ir, Fusion, Source, Ptx };

/// True if LAYERJIT_DUMP (or LAYERJIT_DUMP_DIR) asks for the stage. Throws UserError when the
/// variables are malformed (debug_env_problem says how).
bool dump_enabled(DumpStage stage);

/// Writes `text` under a header naming the stage and `what` to stderr, or to a file under
/// LAYERJIT_DUMP_DIR (written beside and renamed into place), if the stage is enabled.
void dump(DumpStage stage, std::string_view what, std::string_view text);

enum class LogCategory {
  Dispatch,  ///< each executable launch sequence: kernel, config, where it came from (exec/)
  Compile,   ///< each NVRTC compile: kernel, target, seconds (jit/)
  Cache,     ///< each kernel cache lookup and store: hit, miss, stored, not stored and why (jit/)
  Tune,      ///< each autotuning candidate's result and the tuning record's decision (tune/)
};

/// True if LAYERJIT_LOG names the category. Throws UserError when it is malformed.
bool log_enabled(LogCategory c);

/// "layerjit <category>: <text>" on stderr, if the category is enabled.
void log_line(LogCategory c, std::string_view text);

/// What LAYERJIT_DUMP, LAYERJIT_DUMP_DIR and LAYERJIT_LOG take (printed for `help`).
std::string debug_env_help();

/// Checks the three variables: nullopt when fine, else what is wrong. `help` is set when one of
/// them is `help` (the CLI then prints debug_env_help() and exits).
std::optional<std::string> debug_env_problem(bool* help);

}  // namespace lj

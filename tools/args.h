// One command's command line: CLI11 underneath (tools/args.cpp is the only file that includes it, so
// its templates are compiled once). Every option takes `--opt VALUE` and `--opt=VALUE`; an unknown
// option, a missing value or an extra argument is a UsageError (exit 2); `--help` prints the
// command's synopsis and text followed by the option list CLI11 parses, so the two cannot disagree.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/fusion/fusion_group.h"
#include "tools/cli.h"

namespace lj::cli {

class CommandLine {
 public:
  /// `usage`: the synopsis lines ("usage: layerjit NAME ..."), a blank line, then what the command
  /// does (the kXxxUsage texts). `command` names it in errors ("plan", "cache show").
  CommandLine(std::string command, std::string usage);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  /// FILE ('-' reads standard input), --graph NAME, --bind SYM=N,... (repeatable).
  void graph_options(GraphOptions& o);
  /// A flag that sets `target` to true.
  void flag(const std::string& name, bool& target, const std::string& help);
  /// A flag that runs `on` (e.g. clears a FusionOptions field).
  void flag(const std::string& name, std::function<void()> on, const std::string& help);
  /// An option with one value (given twice: the last counts).
  void option(const std::string& name, std::string& target, const std::string& value_name, const std::string& help);
  void option(const std::string& name, std::optional<std::string>& target, const std::string& value_name,
              const std::string& help);
  /// An option whose every occurrence's value goes to `on` in order (the checks are the caller's).
  void option(const std::string& name, std::function<void(const std::string&)> on, const std::string& value_name,
              const std::string& help);
  /// A positional argument (after the options are matched), optional unless `required`.
  void positional(const std::string& name, std::optional<std::string>& target, const std::string& help,
                  bool required = false);

  /// Parses `args` (after the command's name). False when --help was given: the help was printed
  /// to stdout and the command returns kExitOk. Throws UsageError for a malformed command line.
  bool parse(const std::vector<std::string>& args);
  /// The text --help prints.
  std::string help() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The planner's switches, as `layerjit plan` takes them: --no-fuse, --no-matmul-epilogues,
/// --no-output-view-copies, --no-norm-folding, then fused_plan_flags'.
void fusion_flags(CommandLine& cl, FusionOptions& fo);
/// The switches that choose among fused plans (--no-one-row-prologues, --norm-prologues,
/// --no-norm-prologues, --quantize-prologues, --packed-weights): what `run` and `bench` take, which
/// build the unfused plan beside the fused one.
void fused_plan_flags(CommandLine& cl, FusionOptions& fo);

/// A UsageError when a `--bind` symbol is none of the module's graphs' symbols (a misspelt
/// `--bind X=5` would otherwise be ignored), naming the symbols there are.
void check_bound_symbols(const Module& m, const Bindings& b);

/// The first lines of a kXxxUsage text, up to its first blank line: what an error message repeats.
std::string synopsis(const std::string& usage);

}  // namespace lj::cli

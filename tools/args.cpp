// CommandLine over CLI11 (see args.h).
#include "tools/args.h"

#include "compiler/parser/edit_distance.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lj::cli {

namespace {

// Help in the house form: our synopsis and text, then "options:" with one line per option as CLI11
// lays them out (it knows their names and value names; the help strings are ours).
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) { column_width(32); }
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = usage_;
    if (!out.empty() && out.back() != '\n') out += '\n';
    std::vector<const CLI::Option*> opts = app->get_options([](const CLI::Option* o) { return !o->get_description().empty(); });
    std::string positionals, options;
    for (const CLI::Option* o : opts) (o->nonpositional() ? options : positionals) += make_option(o, !o->nonpositional());
    if (!positionals.empty()) out += "\narguments:\n" + positionals;
    out += "\noptions:\n" + options;
    return out;
  }

 private:
  std::string usage_;
};

}  // namespace

struct CommandLine::Impl {
  std::string command;
  std::string usage;
  CLI::App app;
  std::vector<std::string> long_names;  // for suggestions
  bool has_file = false;

  Impl(std::string c, std::string u) : command(std::move(c)), usage(std::move(u)), app("", "layerjit " + command) {
    app.formatter(std::make_shared<HelpFormatter>(usage));
    app.set_help_flag("-h,--help", "this help");
    // Unmatched arguments are ours to report: CLI11's wording names neither the command nor a fix.
    app.allow_extras();
  }

  CLI::Option* named(CLI::Option* o, const std::string& name) {
    long_names.push_back(name);
    return o;
  }
};

CommandLine::CommandLine(std::string command, std::string usage)
    : impl_(std::make_unique<Impl>(std::move(command), std::move(usage))) {}

CommandLine::~CommandLine() = default;

void CommandLine::graph_options(GraphOptions& o) {
  positional("FILE", o.file, "a .lj file or a Hugging Face model directory ('-': standard input; none: the built-in Llama-3-8B layer)");
  impl_->has_file = true;
  option("--graph", o.graph, "NAME", "only the graph @NAME of the input");
  option("--bind", [&o](const std::string& v) { parse_bindings(v, o.bindings); }, "SYM=N,...",
         "symbol values, e.g. T=4096 or B=1,C=4096 (repeatable)");
}

void CommandLine::flag(const std::string& name, bool& target, const std::string& help) {
  impl_->named(impl_->app.add_flag(name, target, help), name);
}

void CommandLine::flag(const std::string& name, std::function<void()> on, const std::string& help) {
  impl_->named(impl_->app.add_flag_callback(name, std::move(on), help), name);
}

void CommandLine::option(const std::string& name, std::string& target, const std::string& value_name,
                         const std::string& help) {
  impl_->named(impl_->app.add_option(name, target, help), name)
      ->type_name(value_name)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void CommandLine::option(const std::string& name, std::optional<std::string>& target, const std::string& value_name,
                         const std::string& help) {
  impl_->named(impl_->app.add_option_function<std::string>(name, [&target](const std::string& v) { target = v; }, help), name)
      ->type_name(value_name)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void CommandLine::option(const std::string& name, std::function<void(const std::string&)> on, const std::string& value_name,
                         const std::string& help) {
  // Each occurrence's value in order: the callback runs per value, not once on the last.
  impl_->named(impl_->app.add_option_function<std::vector<std::string>>(
                   name, [on = std::move(on)](const std::vector<std::string>& vs) { for (const auto& v : vs) on(v); }, help),
               name)
      ->type_name(value_name)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->expected(1);  // one value per occurrence (and no "..." in the help)
}

void CommandLine::positional(const std::string& name, std::optional<std::string>& target, const std::string& help,
                             bool required) {
  CLI::Option* o = impl_->app.add_option_function<std::string>(name, [&target](const std::string& v) { target = v; }, help);
  o->type_name("");
  if (required) o->required();
}

bool CommandLine::parse(const std::vector<std::string>& args) {
  CLI::App& app = impl_->app;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return false;
  } catch (const CLI::ArgumentMismatch& e) {
    // The one mismatch left with last-wins options: a value missing ("--bind: 1 required ... missing").
    std::string what = e.what();
    const size_t colon = what.find(':');
    throw UsageError{colon == std::string::npos ? what : fmt::format("{} needs a value", what.substr(0, colon))};
  } catch (const CLI::ParseError& e) {
    throw UsageError{e.what()};
  }
  const std::vector<std::string> extra = app.remaining();
  if (extra.empty()) return true;
  const std::string& a = extra.front();
  if (a.size() > 1 && a[0] == '-') {
    const std::string flag = a.substr(0, a.find('='));
    std::string best;
    size_t best_d = 3;  // at most two edits away
    for (const std::string& n : impl_->long_names)
      if (size_t d = edit_distance(flag, n); d < best_d) best_d = d, best = n;
    throw UsageError{best.empty() ? fmt::format("unknown option '{}'", a)
                                  : fmt::format("unknown option '{}' (did you mean {}?)", a, best)};
  }
  throw UsageError{impl_->has_file ? fmt::format("unexpected argument '{}': only one FILE may be given", a)
                                   : fmt::format("unexpected argument '{}'", a)};
}

std::string CommandLine::help() const { return impl_->app.help(); }

void check_bound_symbols(const Module& m, const Bindings& b) {
  std::vector<std::string> all;
  for (const Graph& g : m.graphs)
    for (const std::string& s : g.symbols())
      if (std::find(all.begin(), all.end(), s) == all.end()) all.push_back(s);
  for (const auto& [sym, value] : b.values) {
    if (std::find(all.begin(), all.end(), sym) != all.end()) continue;
    std::string where;
    for (const Graph& g : m.graphs) where += (where.empty() ? "@" : ", @") + g.name();
    throw UsageError{all.empty() ? fmt::format("--bind {}={}: {} has no symbols", sym, value, where)
                                 : fmt::format("--bind {}={}: no such symbol in {} (its symbols: {})", sym, value, where,
                                               fmt::join(all, ", "))};
  }
}

void fusion_flags(CommandLine& cl, FusionOptions& fo) {
  cl.flag("--no-fuse", [&fo] { fo.fuse = false; }, "one kernel per op (the unfused baseline)");
  cl.flag("--no-matmul-epilogues", [&fo] { fo.matmul_epilogues = false; }, "every matmul alone, its epilogue ops kernels of their own");
  cl.flag("--no-output-view-copies", [&fo] { fo.copy_output_views = false; }, "returned views of larger buffers stay views");
  cl.flag("--no-norm-folding", [&fo] { fo.fold_norms = false; }, "keep RMSNorms instead of folding them into the next matmuls");
  fused_plan_flags(cl, fo);
}

void fused_plan_flags(CommandLine& cl, FusionOptions& fo) {
  cl.flag("--no-one-row-prologues", [&fo] { fo.one_row_prologues = false; }, "at one row, rms_scale and rope_table keep kernels of their own");
  cl.flag("--norm-prologues", [&fo] { fo.norm_prologues = true; }, "at one row, the rms_norm before a 4-bit GEMV joins it (slower on the H100: off by default)");
  cl.flag("--no-norm-prologues", [&fo] { fo.norm_prologues = false; }, "at one row, the rms_norm before a 4-bit GEMV keeps its row kernel (the default)");
  cl.flag("--quantize-prologues", [&fo] { fo.quantize_prologues = true; },
          "at one row, each CTA of the GEMV quantizes an fp8 or i8 x itself (slower on the H200: off by default)");
  cl.option("--quantize-prologue-rows", [&fo](const std::string& v) {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < 0)
      throw UsageError{"--quantize-prologue-rows expects a row count (0 or more), got '" + v + "'"};
    fo.quantize_prologue_rows = n;
  }, "N", "at one row, the GEMVs whose W has at most N rows quantize an fp8 or i8 x in each CTA (default 0: none)");
  cl.flag("--row-tails", [&fo] { fo.row_tails = true; },
          "at one row, the quantize (and rms_norm) after a GEMV runs in the GEMV's last CTA (slower on the H100: off by default)");
  cl.flag("--no-cache-prefetch", [&fo] { fo.cache_prefetch = false; },
          "decode attention waits for the QKV kernel before reading any of its cache (by default it streams the old rows meanwhile)");
  cl.flag("--packed-weights", [&fo] { fo.packed_weight_gemms = true; },
          "4-bit weights stay packed at every size: the GEMMs read the codes (no bf16 copy; slower for now)");
}

std::string synopsis(const std::string& usage) {
  const size_t blank = usage.find("\n\n");
  return blank == std::string::npos ? usage : usage.substr(0, blank + 1);
}

}  // namespace lj::cli

// LAYERJIT_DUMP, LAYERJIT_DUMP_DIR and LAYERJIT_LOG: parsing, printing, files (see dump.h).
#include "compiler/dump.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj {

namespace {

constexpr std::array<const char*, 4> kStages = {"ir", "fusion", "source", "ptx"};
constexpr std::array<const char*, 4> kStageExt = {".lj", ".txt", ".cu", ".ptx"};
constexpr std::array<const char*, 4> kCategories = {"dispatch", "compile", "cache", "tune"};

// Parsed once: the environment does not change while a command runs.
struct DebugSettings {
  std::array<bool, 4> dump{};
  std::array<bool, 4> log{};
  std::string dir;        // LAYERJIT_DUMP_DIR
  std::string problem;    // what is malformed ("" when nothing)
  bool help = false;

  // "a,b,all" against `names`; unknown names go to `problem`.
  template <size_t N>
  void parse(const char* var, const char* text, const std::array<const char*, N>& names, std::array<bool, N>& on) {
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty()) continue;
      if (item == "help") {
        help = true;
        continue;
      }
      bool known = false;
      for (size_t i = 0; i < N; ++i)
        if (item == "all" || item == names[i]) on[i] = known = true;
      if (!known && problem.empty()) {
        std::string list;
        for (const char* n : names) list += fmt::format("{}, ", n);
        problem = fmt::format("{}: unknown {} '{}' (it takes {}all or help)", var, var == std::string("LAYERJIT_LOG") ? "category" : "stage",
                              item, list);
      }
    }
  }

  DebugSettings() {
    const char* d = std::getenv("LAYERJIT_DUMP");
    if (d) parse("LAYERJIT_DUMP", d, kStages, dump);
    if (const char* l = std::getenv("LAYERJIT_LOG")) parse("LAYERJIT_LOG", l, kCategories, log);
    if (const char* dd = std::getenv("LAYERJIT_DUMP_DIR"); dd && *dd) {
      dir = dd;
      if (!d) dump.fill(true);  // a directory alone: every stage
    }
  }
};

const DebugSettings& settings() {
  static const DebugSettings s;
  return s;
}

// The settings for a library call: malformed ones are the caller's error; `help` prints once.
const DebugSettings& checked() {
  const DebugSettings& s = settings();
  if (!s.problem.empty()) throw UserError(s.problem);
  static const bool printed = [&] {
    if (s.help) std::fputs(debug_env_help().c_str(), stderr);
    return true;
  }();
  (void)printed;
  return s;
}

// A file name from `what` (a kernel, "@graph", a path: its last component): letters, digits, '.',
// '-', '_' only.
std::string file_stem(std::string_view what) {
  if (const size_t slash = what.rfind('/'); slash != std::string_view::npos) what.remove_prefix(slash + 1);
  std::string out;
  for (char c : what) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (c == '@' && out.empty()) continue;
    out += keep ? c : '_';
  }
  return out.empty() ? "unnamed" : out;
}

void write_dump_file(const std::string& dir, DumpStage stage, std::string_view what, std::string_view text) {
  const size_t i = static_cast<size_t>(stage);
  const std::filesystem::path sub = std::filesystem::path(dir) / kStages[i];
  std::error_code ec;
  std::filesystem::create_directories(sub, ec);
  if (ec) throw UserError(fmt::format("LAYERJIT_DUMP_DIR={}: cannot create {}: {}", dir, sub.string(), ec.message()));
  std::string name = file_stem(what);
  const std::string ext = kStageExt[i];
  if (name.size() < ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) name += ext;
  const std::filesystem::path file = sub / name;
  const std::filesystem::path tmp = sub / fmt::format(".{}.{}.tmp", name, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out.good()) {
      std::filesystem::remove(tmp, ec);
      throw UserError(fmt::format("LAYERJIT_DUMP_DIR={}: cannot write {}", dir, file.string()));
    }
  }
  std::filesystem::rename(tmp, file, ec);  // whole or not at all
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw UserError(fmt::format("LAYERJIT_DUMP_DIR={}: cannot write {}", dir, file.string()));
  }
}

}  // namespace

bool dump_enabled(DumpStage stage) { return checked().dump[static_cast<size_t>(stage)]; }

void dump(DumpStage stage, std::string_view what, std::string_view text) {
  const DebugSettings& s = checked();
  if (!s.dump[static_cast<size_t>(stage)]) return;
  if (!s.dir.empty()) return write_dump_file(s.dir, stage, what, text);
  std::fprintf(stderr, "== LAYERJIT_DUMP %s: %.*s ==\n%.*s", kStages[static_cast<size_t>(stage)], static_cast<int>(what.size()),
               what.data(), static_cast<int>(text.size()), text.data());
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
}

bool log_enabled(LogCategory c) { return checked().log[static_cast<size_t>(c)]; }

void log_line(LogCategory c, std::string_view text) {
  if (!log_enabled(c)) return;
  // One write per line, so lines from compile threads do not interleave.
  const std::string line = fmt::format("layerjit {}: {}\n", kCategories[static_cast<size_t>(c)], text);
  std::fputs(line.c_str(), stderr);
}

std::string debug_env_help() {
  return "layerjit debug output (environment variables; names comma-separated, `all` for every one):\n"
         "  LAYERJIT_DUMP=STAGES      print pipeline stages to stderr:\n"
         "                              ir       the input graphs in canonical text IR\n"
         "                              fusion   each fusion plan, as `layerjit plan` prints it\n"
         "                              source   each generated kernel's CUDA C++\n"
         "                              ptx      each kernel's PTX (where it is compiled or read with PTX)\n"
         "  LAYERJIT_DUMP_DIR=DIR     write those stages to DIR/<stage>/<name>.{lj,txt,cu,ptx} instead\n"
         "                            (every stage when LAYERJIT_DUMP is unset)\n"
         "  LAYERJIT_LOG=CATEGORIES   one line per event on stderr:\n"
         "                              dispatch each executable's launches: kernel, config, where it came from\n"
         "                              compile  each NVRTC compile: kernel, target, seconds\n"
         "                              cache    each kernel cache lookup (hit, miss) and store\n"
         "                              tune     each autotuning candidate's result and the record kept\n"
         "  LAYERJIT_CACHE=on|readonly|off   use the kernel cache and tuning records (default on), only\n"
         "                            read them, or neither (every kernel compiled, no tuned config)\n";
}

std::optional<std::string> debug_env_problem(bool* help) {
  const DebugSettings& s = settings();
  if (help) *help = s.help;
  if (!s.problem.empty()) return s.problem;
  return std::nullopt;
}

}  // namespace lj

// LAYERJIT_DUMP parsing and printing.
#include "compiler/dump.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace lj {

namespace {
const char* stage_name(DumpStage s) {
  switch (s) {
    case DumpStage::Ir: return "ir";
    case DumpStage::Fusion: return "fusion";
    case DumpStage::Source: return "source";
    case DumpStage::Ptx: return "ptx";
  }
  return "?";
}

// Parsed once: the environment does not change while a command runs.
struct DumpSettings {
  bool on[4] = {false, false, false, false};
  DumpSettings() {
    const char* env = std::getenv("LAYERJIT_DUMP");
    if (!env) return;
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty()) continue;
      bool known = false;
      for (int i = 0; i < 4; ++i) {
        if (item == "all" || item == stage_name(static_cast<DumpStage>(i))) {
          on[i] = true;
          known = true;
        }
      }
      if (!known)
        std::fprintf(stderr, "layerjit: warning: LAYERJIT_DUMP: unknown stage '%s' (stages: ir, fusion, source, ptx, all)\n",
                     item.c_str());
    }
  }
};
const DumpSettings& settings() {
  static const DumpSettings s;
  return s;
}
}  // namespace

bool dump_enabled(DumpStage stage) { return settings().on[static_cast<int>(stage)]; }

void dump(DumpStage stage, std::string_view what, std::string_view text) {
  if (!dump_enabled(stage)) return;
  std::fprintf(stderr, "== LAYERJIT_DUMP %s: %.*s ==\n%.*s", stage_name(stage), static_cast<int>(what.size()), what.data(),
               static_cast<int>(text.size()), text.data());
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
}

}  // namespace lj

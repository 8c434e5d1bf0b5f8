// libFuzzer target past the parser: every graph of a module that parses has its symbols bound
// (values drawn from the input's hash: small ones, now and then 2^40 to reach the size checks), its
// sizes checked, and is lowered fused (norms folded, planned for those sizes: one-row and weight
// prologues) and unfused, each plan printed. A UserError is the expected answer to a graph or size
// the compiler refuses; a crash, a sanitizer report, an InternalError or any other exception
// escaping is a bug. scripts/fuzz.sh runs it after parser_fuzz.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/text.h"

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<lj::Module> m;
  try {
    m = lj::parse_module(text, "fuzz.lj");
  } catch (const lj::UserError&) {
    return 0;  // parser_fuzz's ground
  }
  uint64_t h = fnv1a(text);
  for (const lj::Graph& g : m->graphs) {
    lj::Bindings b;
    for (const std::string& s : g.symbols()) {
      const uint64_t pick = h & 31;
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      b.set(s, pick == 31 ? int64_t{1} << 40 : static_cast<int64_t>(pick) + 1);
    }
    try {
      g.check_sizes(b);
      for (bool fuse : {true, false}) {
        lj::FusionOptions fo;
        fo.fuse = fuse;
        if (fuse) fo.sizes = b;
        const lj::Lowered l = lj::lower(g, fo);
        (void)lj::print_plan(*l.graph, l.plan, b, &g);
      }
    } catch (const lj::UserError& e) {
      (void)e.what();
    }
  }
  return 0;
}

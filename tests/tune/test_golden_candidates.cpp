// The golden kernel set's second half (the first, scripts/golden-kernels.sh, hashes every default
// kernel's source and PTX): the CUDA C++ of every candidate the tuner may store for the Llama layers'
// matmul and attention groups (group_candidates: what `layerjit tune` times, so what `run` may
// launch from the tuning DB), for sm_80, sm_90 and sm_90a, as XXH3-128 checksums against
// tests/golden/candidates.txt. A refactor of the compiler leaves every line unchanged; a change
// that means to change kernels rewrites the file (LAYERJIT_GOLDEN_UPDATE=1 when running this test)
// in the same commit and names the kernels it changes.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cache/key.h"
#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "tune/group_candidates.h"

using namespace lj;

namespace {

struct Case {
  std::string name;
  Graph graph;
  Bindings hint;
};

Bindings bind(std::initializer_list<std::pair<const char*, int64_t>> values) {
  Bindings b;
  for (const auto& [s, v] : values) b.set(s, v);
  return b;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"decode_b1", llama_decode(LlamaConfig::llama3_8b()), bind({{"B", 1}, {"C", 4096}})});
  out.push_back({"decode_b32", llama_decode(LlamaConfig::llama3_8b()), bind({{"B", 32}, {"C", 4096}})});
  out.push_back({"prefill_t4096", llama_prefill(LlamaConfig::llama3_8b()), bind({{"T", 4096}})});
  const Module fp8 = parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/examples/llama3_8b_fp8.lj");
  for (const Graph& g : fp8.graphs) {
    if (g.name() == "llama3_8b_fp8_decode") out.push_back({"fp8_decode_b1", g, bind({{"B", 1}, {"C", 4096}})});
    if (g.name() == "llama3_8b_fp8_prefill") out.push_back({"fp8_prefill_t4096", g, bind({{"T", 4096}})});
  }
  return out;
}

}  // namespace

TEST_CASE("every tuner candidate of the Llama layers generates the golden source", "[tune][golden]") {
  std::vector<std::string> now;
  for (const Case& c : cases())
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      EmitOptions eo;
      eo.sm = arch[3] == '8' ? 80 : 90;
      eo.arch_specific = std::string_view(arch) == "sm_90a";
      eo.max_shared_bytes = eo.sm == 80 ? 163 * 1024 : 227 * 1024;
      eo.hint = c.hint;
      // The plan the executable and `layerjit tune` make: after lower()'s passes (norm folding).
      const Lowered lowered = lower(c.graph);
      for (const FusionGroup& grp : lowered.plan.groups) {
        if (grp.kind != GroupKind::Matmul && grp.kind != GroupKind::Attention) continue;
        for (const tune::Candidate& k : tune::group_candidates(*lowered.graph, grp, eo).list)
          now.push_back(fmt::format("{} {} g{} {} | {}", c.name, arch, grp.id, k.config, cache::checksum(k.kernel.source)));
      }
    }
  REQUIRE(now.size() > 1000);
  const std::string path = std::string(LAYERJIT_SOURCE_DIR) + "/tests/golden/candidates.txt";
  if (const char* u = std::getenv("LAYERJIT_GOLDEN_UPDATE"); u && std::string_view(u) == "1") {
    std::ofstream f(path, std::ios::trunc);
    for (const std::string& line : now) f << line << "\n";
    REQUIRE(f.good());
    WARN("wrote " << now.size() << " candidate checksums to " << path);
    return;
  }
  std::ifstream f(path);
  REQUIRE(f.good());
  std::vector<std::string> golden;
  for (std::string line; std::getline(f, line);) golden.push_back(line);
  std::vector<std::string> differ;
  for (size_t i = 0; i < std::max(now.size(), golden.size()) && differ.size() < 20; ++i) {
    const std::string a = i < golden.size() ? golden[i] : "(none)", b = i < now.size() ? now[i] : "(none)";
    if (a != b) differ.push_back(fmt::format("- {}\n+ {}", a, b));
  }
  std::ostringstream msg;
  for (const std::string& d : differ) msg << d << "\n";
  INFO("golden " << golden.size() << " lines, now " << now.size() << "; first differences:\n" << msg.str());
  CHECK(differ.empty());
  CHECK(golden.size() == now.size());
}

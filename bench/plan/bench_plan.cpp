// The planner's cost against graph size (issue 31: chains of 1k / 2k / 4k / 8k ops took 0.2 / 0.8 /
// 6 / 40 s and 100k never finished, the cycle check walking the whole group per absorbed node).
// Two shapes of graph, each at about 1k, 10k and 100k ops, parsed from text and then lowered
// (norm folding and fusion planning, as `layerjit plan` does), median of --repeat runs:
//   chain   one elementwise chain (silu, relu, ...): one group that grows node by node;
//   layers  L decoder-like blocks, each rms_norm -> matmul -> silu -> add (residual) with its own
//           params: many groups, norm folding, matmul epilogues.
// No GPU. Prints one table (docs/perf.md records it).
//
// usage: bench_plan [--repeat 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/text.h"

using namespace lj;
using Clock = std::chrono::steady_clock;

namespace {

std::string chain(int n) {
  std::string s = "graph @chain(%x: f32[T, 64]) {\n";
  std::string prev = "%x";
  for (int i = 0; i < n; ++i) {
    s += fmt::format("  %v{} = {}({})\n", i, i % 2 ? "relu" : "silu", prev);
    prev = fmt::format("%v{}", i);
  }
  return s + "  return " + prev + "\n}\n";
}

std::string layers(int n) {
  std::string params, body;
  std::string x = "%x";
  for (int l = 0; l < n; ++l) {
    params += fmt::format(", %n{}: param bf16[256], %w{}: param bf16[256, 256]", l, l);
    body += fmt::format("  %h{0} = rms_norm({1}, %n{0}) {{eps = 1e-5}}\n  %y{0} = matmul(%h{0}, %w{0})\n  %a{0} = silu(%y{0})\n"
                        "  %x{0} = add({1}, %a{0})\n",
                        l, x);
    x = fmt::format("%x{}", l);
  }
  return "graph @layers(%x: bf16[T, 256]" + params + ") {\n" + body + "  return " + x + "\n}\n";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("| graph | ops | groups | parse ms | plan ms (lower: fold norms + fusion) | plan us per op |\n|---|---|---|---|---|---|\n");
  struct Case {
    const char* name;
    std::string text;
  };
  const std::vector<Case> cases = {{"chain", chain(1000)},   {"chain", chain(10000)},  {"chain", chain(100000)},
                                   {"layers", layers(250)},  {"layers", layers(2500)}, {"layers", layers(25000)}};
  for (const Case& c : cases) {
    std::vector<double> parse_ms, plan_ms;
    size_t ops = 0, groups = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = Clock::now();
      Module m = parse_module(c.text, c.name);
      const auto t1 = Clock::now();
      FusionOptions fo;
      fo.sizes.set("T", 1);
      const Lowered l = lower(m.graphs.at(0), fo);
      const auto t2 = Clock::now();
      parse_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      plan_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      ops = m.graphs.at(0).nodes().size();
      groups = l.plan.groups.size();
    }
    const double p = median(plan_ms);
    std::printf("| %s | %zu | %zu | %.1f | %.1f | %.2f |\n", c.name, ops, groups, median(parse_ms), p, p * 1e3 / static_cast<double>(ops));
  }
  return 0;
}

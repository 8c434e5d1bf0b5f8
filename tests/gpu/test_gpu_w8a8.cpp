// GPU tier: the W8A8 projections' fused epilogues against the CPU reference. An i8 matmul returns
// f32 sums times the token's scale; a per-channel weight scale (mul by s[N]) and a cast to bf16 before
// a split are the epilogue's column scale (MatmulEpilogue::col_scale): each sum times its column's
// factor, rounded once to bf16 where the SwiGLU halves or RoPE heads are formed. Every kernel family
// (GEMV, mma.sync m16n8k32 s8, the Hopper GEMM's k32 s8 wgmma) on odd shapes, codes over the whole
// i8 range, scales of the size real checkpoints have, outputs poisoned (check_group).
#include <fmt/format.h>

#include "layerjit/host_tensor.h"
#include "layerjit/text.h"
#include "tests/codegen/w8a8_graphs.h"
#include "tests/gpu/group_check.h"

using namespace lj;

namespace {

// i8 codes uniform over [-127, 127] (as a per-token quantize makes them; never all zeros), positive
// row and column scales of 1/8128 .. 4/8128, so that sums of ~1e5 give values of order 1 as a
// real layer's do; the rest as random_input.
HostTensor w8a8_input(const Graph& g, ValueId v, const Bindings& b, uint64_t seed) {
  const ValueInfo& info = g.value(v);
  if (info.type.dtype == DType::I8) {
    HostTensor t(DType::I8, resolve(info.type.shape, b));
    fill_uniform(t, seed, -127.49, 127.49);
    return t;
  }
  if (info.type.dtype == DType::F32 && (info.name == "rs" || info.name == "cs")) {
    HostTensor t(DType::F32, resolve(info.type.shape, b));
    fill_uniform(t, seed, 1.0 / 8128, 4.0 / 8128);
    return t;
  }
  return lj_test::random_input(g, v, b, seed);
}
}  // namespace

TEST_CASE("W8A8 epilogues: per-channel scales before SwiGLU and RoPE match the reference in every kernel family", "[gpu][gemm][int8]") {
  Module m = parse_module(lj_test::kW8a8EpilogueGraphs, "<w8a8 epilogues>");
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  // Each family's paths: the SIMT GEMV, the tensor-core GEMV (m16n8k32 s8; K a multiple of 16), mma.sync tiles with i8 k tiles of 64 and 128 bytes, 16-row
  // tiles split along K, and on an sm_90 GPU the Hopper GEMM (128 x 256, split-K, ping-pong,
  // 64-row tiles) where the rows are TMA-loadable.
  std::vector<std::string> configs = {"gemv mt=4 u=4 warps=8", "gemv mt=2 u=2 warps=3", "gemv mma u=4 warps=8", "gemv mma u=2 warps=4", "gemv mma stages=8 warps=8",
                                      "mma bm=128 bn=128 bk=64 wm=2 wn=2 stages=4 gm=8",
                                      "mma bm=64 bn=64 bk=128 wm=2 wn=2 stages=4 gm=8", "mma bm=16 bn=64 bk=128 wm=1 wn=2 stages=6 gm=8",
                                      "mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8 sk=2"};
  const bool hopper = ctx.info().cc() == 90;
  if (hopper)
    for (const char* c : {"wgmma bm=128 bn=256 stages=4 gm=8", "wgmma bm=128 bn=128 stages=4 gm=8 sk=2", "wgmma bm=128 bn=128 stages=4 gm=8 pingpong",
                          "wgmma bm=128 bn=64 stages=6 gm=8", "wgmma bm=64 bn=128 stages=4 gm=8"})
      configs.push_back(c);
  uint64_t seed = 2800;
  int runs = 0;
  for (const Graph& g : m.graphs) {
    const FusionPlan plan = plan_fusion(g);
    const FusionGroup& grp = plan.groups.back();
    REQUIRE(grp.kind == GroupKind::Matmul);
    REQUIRE(grp.matmul.col_scale >= 0);  // the scale and the cast joined the epilogue, before the split
    for (int64_t rows : {1, 7, 129, 300}) {
      auto run = [&](const EmitOptions& emit) {
        lj_test::GroupCase c;
        c.graph = &g;
        c.bind.set("M", rows);
        c.bind.set("C", 5);
        c.seed = ++seed;
        c.emit = emit;
        c.input = w8a8_input;
        INFO(g.name() << ", M = " << rows << ", config " << (emit.matmul ? emit.matmul->str() : "default"));
        lj_test::check_group(ctx, *stream, c, grp);
        ++runs;
      };
      run(EmitOptions{});
      for (const std::string& text : configs) {
        EmitOptions e;
        e.matmul = parse_matmul_config(text, nullptr);
        REQUIRE(e.matmul.has_value());
        if (e.matmul->family == MatmulConfig::Family::Wgmma) e.sm = 90, e.arch_specific = true, e.sm_count = e.matmul->persistent ? 3 : 132;
        if (reject_reason(*e.matmul, matmul_problem(g, grp, e)).empty()) run(e);
      }
    }
  }
  CHECK(runs >= 4 * 4 * 6);
}

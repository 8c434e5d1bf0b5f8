// The Hopper GEMM in clusters of two ("wgmma ... cluster=2"): the pair's CTAs take row
// tiles m0 and m0 + 128 of one column tile and share its W tile, each loading one box of it with a
// TMA multicast into both; a slot is refilled once the consumers of both CTAs released it. The GPU
// tests that run it: test_gpu_gemm's Hopper config lists (odd shapes, every epilogue) and the i8
// candidate test, where the tuner's candidates include it.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/matmul_config.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"
#include "tests/codegen/gemv_kernel_util.h"

using namespace lj;
using lj_test::count;
using lj_test::ptx_of;

namespace {

const char* kGraphs = R"(
graph @bf16(%x: bf16[M, 1000], %w: param bf16[300, 1000]) {
  %y = matmul(%x, %w)
  return %y
}
graph @i8(%x: i8[M, 4096], %w: param i8[6144, 4096]) {
  %y = matmul(%x, %w) {out_dtype = f32}
  return %y
}
)";

GeneratedKernel cluster_kernel(const Graph& g, const char* config, int sm_count = 132) {
  return lj_test::hopper_matmul(g, config, 4096, sm_count);
}

}  // namespace

TEST_CASE("the Hopper GEMM in clusters of two: W by multicast, releases to both CTAs, whole clusters", "[codegen]") {
  const Module m = parse_module(kGraphs, "<cluster gemm>");
  for (const Graph& g : m.graphs)
    for (const char* config : {"wgmma bm=128 bn=128 stages=4 gm=8 pingpong cluster=2", "wgmma bm=128 bn=128 stages=3 gm=8 persistent cluster=2",
                               "wgmma bm=128 bn=256 stages=4 gm=8 cluster=2"}) {
      const GeneratedKernel k = cluster_kernel(g, config, 133);
      const bool persistent = parse_matmul_config(config, nullptr)->persistent;
      const int bn = parse_matmul_config(config, nullptr)->bn;
      INFO(g.name() << ", " << config);
      CHECK(k.config == config);
      CHECK(k.source.find("__cluster_dims__(2, 1, 1)") != std::string::npos);
      CHECK(k.source.find("/*CLUSTER*/ 2> Gemm;") != std::string::npos);
      // Persistent: the cluster walks pairs of tiles, its producer waits for the peer's last releases
      // after the loop (one tile per CTA: in mainloop()).
      CHECK((k.source.find("for (lj_i64 t = t0, j = 0; t < n_tiles; t += stride, ++j)") != std::string::npos) == persistent);
      CHECK((k.source.find("Gemm::producer_tail(pipe, lj_smem)") != std::string::npos) == persistent);
      // A pair of 128-row tiles per column tile, two CTAs each; an even persistent grid (133 SMs: 132).
      CHECK(k.launch.per_block == 256);
      CHECK(k.launch.max_blocks == (persistent ? 132 : 0));
      CHECK(k.launch.tiles_per_unit == 2 * (((g.name() == "bf16" ? 300 : 6144) + bn - 1) / bn));
      const std::string ptx = ptx_of(k, "sm_90a");
      CHECK(ptx.find(".reqnctapercluster 2, 1, 1") != std::string::npos);
      // One multicast box of W per k tile and one plain box of x; no plain W box.
      CHECK(count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster") == 1);
      CHECK(count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [") == 1);
      CHECK(count(ptx, "barrier.cluster.arrive.release.aligned") == 1);
      CHECK(count(ptx, "mbarrier.arrive.shared::cluster.b64") >= 2);  // the releases, to both CTAs ...
      CHECK(count(ptx, "mbarrier.arrive.release.cluster") == 0);       // ... without a cluster-wide fence each
      // The cluster costs no registers: no more spills than the same config on one CTA (the bf16
      // ping-pong kernel spills 72 bytes either way).
      std::string single = config;
      single.resize(single.size() - std::string(" cluster=2").size());
      auto r = jit::kernel_resources(k, *rt::Target::parse("sm_90a"));
      auto r1 = jit::kernel_resources(cluster_kernel(g, single.c_str()), *rt::Target::parse("sm_90a"));
      INFO((r.ok() ? r->str() : r.message()) << " against one CTA's " << (r1.ok() ? r1->str() : r1.message()));
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      REQUIRE(r1.ok());
      CHECK(r->spill_store_bytes <= r1->spill_store_bytes);
      CHECK(r->spill_load_bytes <= r1->spill_load_bytes);
    }
}

TEST_CASE("the pruner says where clusters of two cannot run", "[codegen]") {
  MatmulProblem p;
  p.m = 4096, p.n = 4096, p.k = 4096, p.dtype = DType::I8, p.sm = 90, p.arch_specific = true, p.tma = true;
  std::string error;
  const auto c = parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 pingpong cluster=2", &error);
  REQUIRE(c.has_value());
  CHECK(c->cluster == 2);
  CHECK(c->str() == "wgmma bm=128 bn=128 stages=4 gm=8 pingpong cluster=2");
  CHECK(reject_reason(*c, p).empty());
  CHECK(reject_reason(*parse_matmul_config("wgmma bm=128 bn=256 stages=4 gm=8 cluster=2", nullptr), p).empty());
  CHECK_THAT(reject_reason(*parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 sk=2 cluster=2", nullptr), p),
             Catch::Contains("cluster=2: clusters take whole 128-row tiles (split-K instead)"));
  CHECK_THAT(reject_reason(*parse_matmul_config("wgmma bm=64 bn=128 stages=4 gm=8 cluster=2", nullptr), p),
             Catch::Contains("(bm=64 instead)"));
  CHECK_THAT(reject_reason(*parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 streamk cluster=2", nullptr), p),
             Catch::Contains("(stream-K instead)"));
  CHECK_THAT(reject_reason(*parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 pingpong cluster=4", nullptr), p),
             Catch::Contains("cluster=4 (1, or 2"));
  MatmulProblem codes = p;
  codes.dtype = DType::BF16;
  codes.weight_codes = true;
  CHECK_THAT(reject_reason(*c, codes), Catch::Contains("cluster=2 with 4-bit codes"));
  MatmulConfig mma_cluster;
  mma_cluster.cluster = 2;
  CHECK_THAT(reject_reason(mma_cluster, p), Catch::Contains("cluster is an option of the wgmma family"));
  CHECK_FALSE(parse_matmul_config("mma bm=128 cluster=2", &error));
  CHECK_THAT(error, Catch::Contains("unknown key 'cluster'"));
  // No tuner candidates (measured no faster: matmul_config.cpp), at any size: an explicit config only.
  for (int64_t m : {0, 128, 4096}) {
    MatmulProblem q = p;
    q.m = m;
    for (const MatmulConfig& x : matmul_candidates(q)) CHECK(x.cluster == 1);
  }
}

// GPU tier, one GPU: the tensor-parallel runtime's NCCL path. A graph whose all_reduce spans one rank
// runs through exec::TpExecutable with a one-rank communicator: the ncclAllReduce is issued between
// the generated kernels, captured into the CUDA graph, and the outputs equal the CPU reference; the
// all_reduces alone capture and replay; a rank graph built without a communicator is refused. The
// two-GPU checks (sharded against unsharded) are test_gpu_tp2's.
#include <algorithm>

#include <fmt/format.h>

#include "layerjit/text.h"
#include "runtime/device_info.h"
#include "tests/gpu/tp_test_support.h"

using namespace lj;

namespace {

// A row-parallel projection, its all_reduce, then the residual add and RMSNorm that follow it in a
// decoder layer; widths that are not multiples of any tile.
constexpr const char* kOneRank = R"(graph @one_rank(%x: bf16[T, 72], %w_up: param bf16[104, 72], %w_down: param bf16[72, 104], %n: param bf16[72]) {
  %h = matmul(%x, %w_up)
  %partial = matmul(%h, %w_down)
  %sum = all_reduce(%partial) {op = "sum", ranks = 1}
  %y = add(%x, %sum)
  %z = rms_norm(%y, %n) {eps = 1e-05}
  return %z, %y
}
)";

Bindings rows(int64_t t) {
  Bindings b;
  b.set("T", t);
  return b;
}

}  // namespace

TEST_CASE("an all_reduce over one rank runs as an NCCL call between the kernels, eagerly and in a CUDA graph", "[gpu][tp]") {
  lj_test::gpu();
  const Graph g = parse_module(kOneRank, "<one_rank>").graphs.at(0);
  for (int64_t t : {1, 37}) {
    INFO("T = " << t);
    exec::TpOptions o;
    o.tp = 1;
    o.build.hint = rows(t);
    o.build.use_cache = false;
    auto e = exec::TpExecutable::build(g, o);
    LJ_REQUIRE_OK(e);
    const auto& steps = (*e)->rank(0).kernels();
    CHECK(std::count_if(steps.begin(), steps.end(), [](const GeneratedKernel& k) { return k.name.ends_with("_all_reduce"); }) == 1);
    lj_test::check_tp_run(**e, g, rows(t), 11 + static_cast<uint64_t>(t), 64);
    LJ_REQUIRE_OK((*e)->capture_collectives(rows(t)));
    LJ_REQUIRE_OK((*e)->replay_collectives());
    LJ_REQUIRE_OK((*e)->synchronize());
  }
}

TEST_CASE("a rank graph without a communicator is refused, naming the all_reduce", "[gpu][tp]") {
  rt::Context& ctx = lj_test::gpu();
  const Graph g = parse_module(kOneRank, "<one_rank>").graphs.at(0);
  exec::BuildOptions bo;
  bo.hint = rows(8);
  auto e = exec::Executable::build(ctx, g, bo);
  REQUIRE(!e.ok());
  CHECK_THAT(e.message(), Catch::Contains("sums %sum over 1 ranks") && Catch::Contains("--tp 1"));
}

TEST_CASE("a rank on a device the machine does not have is refused, saying how many there are", "[gpu][tp]") {
  lj_test::gpu();
  auto drv = rt::Driver::get();
  LJ_REQUIRE_OK(drv);
  auto count = rt::device_count(**drv);
  LJ_REQUIRE_OK(count);
  const Graph g = parse_module(kOneRank, "<one_rank>").graphs.at(0);
  exec::TpOptions o;
  o.tp = 1;
  o.devices = {*count};  // one past the last
  o.build.hint = rows(8);
  auto e = exec::TpExecutable::build(g, o);
  REQUIRE(!e.ok());
  CHECK_THAT(e.message(), Catch::Contains("needs 1 GPU, one per rank") && Catch::Contains(fmt::format("sees {} device", *count)));
}

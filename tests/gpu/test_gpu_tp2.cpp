// GPU tier, two GPUs or more (exits 77, a skip, on a machine with fewer): the sharded small Llama
// layer at tp = 2 over NCCL, prefill and decode at odd sizes, gathered outputs against the CPU
// reference of the unsharded layer, the layer output equal on both ranks, and each rank's captured
// CUDA graph (NCCL calls included) equal to the eager run bit for bit. Issue 36 runs it.
#include <cstdio>
#include <cstdlib>

#include "layerjit/llama.h"
#include "runtime/device_info.h"
#include "tests/gpu/tp_test_support.h"

using namespace lj;

namespace {

// Two GPUs, or a skip (never a pass) that says how many there are.
void need_gpus(int n) {
  lj_test::gpu();
  auto drv = rt::Driver::get();
  LJ_REQUIRE_OK(drv);
  auto count = rt::device_count(**drv);
  LJ_REQUIRE_OK(count);
  if (*count < n) {
    std::printf("skipped: needs %d GPUs, this machine has %d\n", n, *count);
    std::fflush(stdout);
    std::_Exit(lj_test::kSkipExitCode);
  }
}

}  // namespace

TEST_CASE("the small layer at tp = 2 equals the unsharded CPU reference, prefill and decode", "[gpu][tp]") {
  need_gpus(2);
  const LlamaConfig c = LlamaConfig::small();
  for (bool decode : {false, true}) {
    const Graph g = decode ? llama_decode(c) : llama_prefill(c);
    Bindings b;
    if (decode)
      b.set("B", 3), b.set("C", 29);
    else
      b.set("T", 37);
    INFO(g.name());
    exec::TpOptions o;
    o.tp = 2;
    o.build.hint = b;
    auto e = exec::TpExecutable::build(g, o);
    LJ_REQUIRE_OK(e);
    lj_test::check_tp_run(**e, g, b, decode ? 5 : 6, 32);
  }
}

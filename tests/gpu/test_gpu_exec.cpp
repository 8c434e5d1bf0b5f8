// GPU tier: whole graphs through exec::Executable — the small Llama layer (prefill and decode, in
// place KV-cache updates) against the CPU reference, the arena's reuse, the prefill layer's returned
// %v copied out of the QKV projection into a buffer of its own, and the errors a caller can make (an
// unbound input, binding an intermediate, a missing symbol value), and executables from AOT bundles.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string_view>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>

#include <unistd.h>

#include "exec/executable.h"
#include "jit/bundle.h"
#include "runtime/nvrtc.h"
#include "layerjit/llama.h"
#include "layerjit/reference.h"
#include "layerjit/text.h"
#include "runtime/fill.h"
#include "tests/gpu/gpu_test_support.h"

using namespace lj;

namespace {

// Uploads `t` (values exactly representable in its dtype) into a new device buffer bound to `v`.
rt::DeviceBuffer upload_and_bind(rt::Context& ctx, rt::Stream& stream, exec::Executable& e, ValueId v, const HostTensor& t) {
  auto buf = rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(storage_bytes(t.dtype, t.numel())));
  LJ_REQUIRE_OK(buf);
  LJ_REQUIRE_OK(rt::upload_tensor(stream, buf->ptr(), t));
  LJ_REQUIRE_OK(e.bind(v, buf->ptr()));
  return std::move(*buf);
}

// Random inputs for `g` at `b`: positions at the last slot of a cache of C entries (decode) or
// 0..T-1 (prefill), small weights, activations in [-1, 1). i8 weights are codes over [-127, 127]
// (a fill of [-0.05, 0.05) would round every one to 0) and f32 vectors among the params their
// per-channel scales, positive, so that code x scale is as small as the bf16 weights.
std::map<std::string, HostTensor> random_inputs(const Graph& g, const Bindings& b, uint64_t seed) {
  std::map<std::string, HostTensor> host;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    HostTensor t(info.type.dtype, resolve(info.type.shape, b));
    if (info.type.dtype == DType::I8) {
      fill_uniform(t, seed++, -127.49, 127.49);
    } else if (info.is_param && info.type.dtype == DType::F32 && info.type.rank() == 1) {
      fill_uniform(t, seed++, 0.02 / 127, 0.05 / 127);
    } else if (info.type.dtype == DType::I32) {
      const std::optional<int64_t> c = b.get("C");
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = c ? static_cast<double>(*c - 1) : static_cast<double>(i);
    } else {
      fill_uniform(t, seed++, info.is_param && info.type.rank() >= 2 ? -0.05 : -1.0, info.is_param && info.type.rank() >= 2 ? 0.05 : 1.0);
    }
    host.emplace(info.name, std::move(t));
  }
  return host;
}

// The largest |got - want| and the largest |want|; a NaN in `got` fails the test.
std::pair<double, double> max_error(const HostTensor& got, const HostTensor& want) {
  REQUIRE(got.data.size() == want.data.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    REQUIRE(!std::isnan(got.data[i]));
    worst = std::max(worst, std::fabs(got.data[i] - want.data[i]));
    scale = std::max(scale, std::fabs(want.data[i]));
  }
  return {worst, scale};
}

// Every output of `e` after a run against `want` (the CPU reference's), within `1 / tol` of the
// largest reference magnitude.
void check_outputs(rt::Stream& stream, const Graph& g, exec::Executable& e, const Bindings& b, const std::vector<HostTensor>& want,
                   double tol = 32) {
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const ValueId v = g.outputs()[o];
    auto got = e.download(stream, v, b);
    LJ_REQUIRE_OK(got);
    const auto [worst, scale] = max_error(*got, want[o]);
    INFO("output %" << g.value(v).name << ": max |error| " << worst << " of max |value| " << scale);
    CHECK(worst <= scale / tol);
  }
}

// Binds `host` to two plans of `g` (the device copies go to `keep`), runs both at `b` and checks each
// against the CPU reference.
void run_both_against_reference(rt::Context& ctx, rt::Stream& stream, const Graph& g, exec::Executable& a, exec::Executable& c,
                                const std::map<std::string, HostTensor>& host, const Bindings& b, std::vector<rt::DeviceBuffer>& keep) {
  for (ValueId v : g.inputs()) {
    keep.push_back(upload_and_bind(ctx, stream, a, v, host.at(g.value(v).name)));
    keep.push_back(upload_and_bind(ctx, stream, c, v, host.at(g.value(v).name)));
  }
  LJ_REQUIRE_OK(a.run(stream, b));
  LJ_REQUIRE_OK(c.run(stream, b));
  LJ_REQUIRE_OK(stream.synchronize());
  const std::vector<HostTensor> want = run_reference(g, host, b);
  check_outputs(stream, g, a, b, want);
  check_outputs(stream, g, c, b, want);
}

// Every output of two plans of `g` after a run on the same inputs, within `1 / tol` of the largest
// magnitude of the second's.
void check_plans_agree(rt::Stream& stream, const Graph& g, exec::Executable& a, exec::Executable& c, const Bindings& b, double tol) {
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    auto x = a.download(stream, g.outputs()[o], b);
    auto y = c.download(stream, g.outputs()[o], b);
    LJ_REQUIRE_OK(x);
    LJ_REQUIRE_OK(y);
    const auto [worst, scale] = max_error(*x, *y);
    INFO("output %" << g.value(g.outputs()[o]).name << ": plan against plan max |diff| " << worst << " of " << scale);
    CHECK(worst <= scale / tol);
  }
}

// Runs `g` at `b` on random inputs and compares every output with the CPU reference.
void check_against_reference(const Graph& g, const Bindings& b, uint64_t seed, bool programmatic = false) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  exec::BuildOptions bo;
  bo.hint = b;
  bo.use_cache = false;
  bo.programmatic_launch = programmatic;
  auto e = exec::Executable::build(ctx, g, bo);
  LJ_REQUIRE_OK(e);
  const std::map<std::string, HostTensor> host = random_inputs(g, b, seed);
  std::vector<rt::DeviceBuffer> keep;
  for (ValueId v : g.inputs()) keep.push_back(upload_and_bind(ctx, *stream, *e, v, host.at(g.value(v).name)));
  LJ_REQUIRE_OK(e->run(*stream, b));
  LJ_REQUIRE_OK(stream->synchronize());
  check_outputs(*stream, g, *e, b, run_reference(g, host, b));
}

// `g` built for B = 1 (cache of `c` entries) with and without one-row prologues (`fewer` kernels
// fewer with them), both run at B = 1 and at B = 2 (sizes the hint did not promise: the GEMVs loop
// over the rows) against the CPU reference and each other within 1 / `agree`. `adjust` may change
// the random inputs; `configure` sets the plan with prologues (default: the activation-quantize
// prologues on). Returns the kernels a run of the plan with the prologues launches.
size_t check_one_row_prologues(const Graph& g, int64_t c, size_t fewer, uint64_t seed, double agree,
                               const std::function<void(std::map<std::string, HostTensor>&)>& adjust = {},
                               const std::function<void(FusionOptions&)>& configure = {}) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  Bindings one;
  one.set("B", 1);
  one.set("C", c);
  exec::BuildOptions with, without;
  with.hint = without.hint = one;
  with.use_cache = without.use_cache = false;
  if (configure) {
    configure(with.fusion);
  } else {
    with.fusion.quantize_prologues = true;  // (opt-in; a no-op on 16-bit layers)
  }
  without.fusion.one_row_prologues = false;  // (no row tails either: they are one-row plans too)
  auto ew = exec::Executable::build(ctx, g, with);
  auto eo = exec::Executable::build(ctx, g, without);
  LJ_REQUIRE_OK(ew);
  LJ_REQUIRE_OK(eo);
  REQUIRE(ew->launches_per_run() + fewer == eo->launches_per_run());
  Bindings two = one;
  two.set("B", 2);
  for (const Bindings& b : {one, two}) {
    INFO("B = " << *b.get("B"));
    std::map<std::string, HostTensor> host = random_inputs(g, b, ++seed);
    if (adjust) adjust(host);
    std::vector<rt::DeviceBuffer> keep;
    run_both_against_reference(ctx, *stream, g, *ew, *eo, host, b, keep);
    check_plans_agree(*stream, g, *ew, *eo, b, agree);
  }
  return ew->launches_per_run();
}

}  // namespace


TEST_CASE("the small Llama layer runs end to end and matches the CPU reference", "[gpu][exec]") {
  Bindings pre;
  pre.set("T", 33);
  Bindings dec;
  dec.set("B", 3);
  dec.set("C", 9);
  Bindings one;
  one.set("B", 1);
  one.set("C", 17);
  // Programmatic dependent launch (sm_90+, for LaunchRule::early kernels, see docs/exec.md): early
  // CTAs must wait for the previous kernel before touching memory. Off, on, and with every kernel
  // early (LAYERJIT_PDL=all, read when the executable is built).
  for (const char* pdl : {"off", "on", "all"}) {
    INFO("programmatic dependent launch: " << pdl);
    if (std::string_view(pdl) == "all") ::setenv("LAYERJIT_PDL", "all", 1);
    const bool on = std::string_view(pdl) != "off";
    check_against_reference(llama_prefill(LlamaConfig::small()), pre, 1, on);
    check_against_reference(llama_decode(LlamaConfig::small()), dec, 2, on);
    check_against_reference(llama_decode(LlamaConfig::small()), one, 3, on);
    ::unsetenv("LAYERJIT_PDL");
  }
  // Any other value is refused by name rather than read as one of them.
  ::setenv("LAYERJIT_PDL", "yes", 1);
  exec::BuildOptions bo;
  bo.hint = dec;
  auto bad = exec::Executable::build(lj_test::gpu(), llama_decode(LlamaConfig::small()), bo);
  ::unsetenv("LAYERJIT_PDL");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Matchers::Contains("LAYERJIT_PDL=yes: expected 0"));
}

TEST_CASE("folded norms: the layer matches its unfolded plan and the reference, new norm weights are prepared again",
          "[gpu][exec][fold]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  uint64_t seed = 300;
  for (const bool decode : {false, true}) {
    const Graph g = decode ? llama_decode(LlamaConfig::small()) : llama_prefill(LlamaConfig::small());
    Bindings b;
    if (decode) b.set("B", 3), b.set("C", 9);
    else b.set("T", 37);
    std::map<std::string, HostTensor> host = random_inputs(g, b, seed += 20);
    exec::BuildOptions folded, kept;
    folded.hint = kept.hint = b;
    folded.use_cache = kept.use_cache = false;
    kept.fusion.fold_norms = false;
    auto ef = exec::Executable::build(ctx, g, folded);
    auto ek = exec::Executable::build(ctx, g, kept);
    LJ_REQUIRE_OK(ef);
    LJ_REQUIRE_OK(ek);
    // Both norms fold: two weight-preparation kernels, not launched per call.
    const auto& groups = ef->plan().groups;
    REQUIRE(std::count_if(groups.begin(), groups.end(), [](const FusionGroup& grp) { return grp.prepare; }) == 2);
    REQUIRE(ef->launches_per_run() == ef->kernels().size() - 2);
    REQUIRE(ek->launches_per_run() == ek->kernels().size());
    std::vector<rt::DeviceBuffer> keep;
    INFO((decode ? "decode" : "prefill") << ", folded");
    run_both_against_reference(ctx, *stream, g, *ef, *ek, host, b, keep);
    // Folded against unfolded: one rounding of W * w instead of one of each normalised element.
    check_plans_agree(*stream, g, *ef, *ek, b, 64);
    // New norm weights (4x the old: far outside the tolerance if the old folded W were reused),
    // and for decode fresh caches (the run wrote them): the next run prepares the weights again.
    for (const char* name : {"attn_norm", "mlp_norm"}) {
      HostTensor& w = host.at(name);
      for (double& x : w.data) x = static_cast<double>(static_cast<float>(x * 4));
    }
    for (ValueId v : g.inputs())
      if (g.value(v).name == "attn_norm" || g.value(v).name == "mlp_norm" || g.value(v).type.rank() == 4)
        keep.push_back(upload_and_bind(ctx, *stream, *ef, v, host.at(g.value(v).name)));
    LJ_REQUIRE_OK(ef->run(*stream, b));
    LJ_REQUIRE_OK(stream->synchronize());
    INFO("after binding new norm weights");
    check_outputs(*stream, g, *ef, b, run_reference(g, host, b));
  }
}

TEST_CASE("one-row prologues: at B = 1 the QKV and gate/up GEMVs compute the RMS factors and RoPE angles, three kernels fewer",
          "[gpu][exec][fold]") {
  // Two rms_scale kernels and the rope_table kernel join the projections. The same angles bit for
  // bit (both sincos in double of the same products); the factors differ only in the order of the
  // sum of squares, so the outputs agree to a few bf16 steps.
  check_one_row_prologues(llama_decode(LlamaConfig::small()), 23, 3, 700, 128);
}

TEST_CASE("decode attention streams its cache while the QKV kernel runs: decode steps match the plan that waits, bit for bit",
          "[gpu][exec][pdl]") {
  // FusionGroup::cache_before_wait: the attention launches early and loads the cache's rows before
  // each sequence's position before it waits for the QKV kernel, which writes the row at the
  // position. Only when the loads are issued differs, so every output must equal the plan's that
  // waits first, bit for bit, wherever the position falls: at a stage's first or last row (stages
  // of 128 keys), a chunk's (512 keys at this hint), 0, the cache's last slot, in a stage loaded
  // before the wait or in the loop. The caches carry each step's row into the next steps.
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = llama_decode(LlamaConfig::small());
  Bindings b;
  b.set("B", 2);
  b.set("C", 32768);
  exec::BuildOptions early, waits;
  early.hint = waits.hint = b;
  early.use_cache = waits.use_cache = false;
  early.programmatic_launch = waits.programmatic_launch = true;
  waits.fusion.cache_prefetch = false;
  auto ee = exec::Executable::build(ctx, g, early);
  auto ew = exec::Executable::build(ctx, g, waits);
  LJ_REQUIRE_OK(ee);
  LJ_REQUIRE_OK(ew);
  // The plans: one attention reading before its wait, the kernel before it letting it launch.
  const auto& groups = ee->plan().groups;
  auto at = std::find_if(groups.begin(), groups.end(), [](const FusionGroup& grp) { return grp.kind == GroupKind::Attention; });
  REQUIRE(at != groups.end());
  REQUIRE(at != groups.begin());
  CHECK(at->cache_before_wait);
  CHECK(std::prev(at)->trigger_dependents);
  CHECK(std::count_if(groups.begin(), groups.end(), [](const FusionGroup& grp) { return grp.trigger_dependents; }) == 1);
  for (const FusionGroup& grp : ew->plan().groups) CHECK_FALSE((grp.cache_before_wait || grp.trigger_dependents));
  std::map<std::string, HostTensor> host = random_inputs(g, b, 1300);
  ValueId pos = -1;
  for (ValueId v : g.inputs())
    if (g.value(v).name == "pos") pos = v;
  REQUIRE(pos >= 0);
  const std::vector<std::pair<int, int>> steps = {{300, 32767}, {0, 640}, {127, 128}, {128, 255}, {511, 256}, {512, 4095}, {1000, 20000}};
  std::vector<rt::DeviceBuffer> keep;
  auto same_outputs = [&] {
    for (ValueId o : g.outputs()) {
      auto x = ee->download(*stream, o, b);
      auto y = ew->download(*stream, o, b);
      LJ_REQUIRE_OK(x);
      LJ_REQUIRE_OK(y);
      INFO("output %" << g.value(o).name);
      CHECK(x->data == y->data);
    }
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    INFO("step " << s << ": positions " << steps[s].first << " and " << steps[s].second);
    host.at("pos").data = {static_cast<double>(steps[s].first), static_cast<double>(steps[s].second)};
    if (s == 0) {
      run_both_against_reference(ctx, *stream, g, *ee, *ew, host, b, keep);  // binds every input
    } else {
      keep.push_back(upload_and_bind(ctx, *stream, *ee, pos, host.at("pos")));
      keep.push_back(upload_and_bind(ctx, *stream, *ew, pos, host.at("pos")));
      LJ_REQUIRE_OK(ee->run(*stream, b));
      LJ_REQUIRE_OK(ew->run(*stream, b));
      LJ_REQUIRE_OK(stream->synchronize());
    }
    same_outputs();
  }
  // The same through a CUDA graph (the launches' programmatic edges are captured): a replay after
  // poisoning the attention's output's consumers is the eager plan's result again.
  auto graph = ee->capture(*stream, b);
  LJ_REQUIRE_OK(graph);
  for (ValueId o : g.outputs()) {
    auto x = ee->download(*stream, o, b);
    LJ_REQUIRE_OK(x);
    if (g.value(o).type.rank() < 4)  // (not the caches: the replay rewrites one row of each, in place)
      LJ_REQUIRE_OK(rt::fill_poison(*stream, *ee->buffer_address(o, b), static_cast<size_t>(storage_bytes(x->dtype, x->numel())), 2));
  }
  LJ_REQUIRE_OK(graph->replay(*stream));
  LJ_REQUIRE_OK(stream->synchronize());
  same_outputs();
}

TEST_CASE("AOT bundles: the device's cubin runs as the compiled plan bit for bit, an older arch's PTX through the driver, no NVRTC",
          "[gpu][exec][bundle]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = llama_decode(LlamaConfig::small());
  Bindings b;
  b.set("B", 3);
  b.set("C", 37);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("layerjit-gpu-bundle-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // This GPU's own target (as `layerjit bundle` writes on it), and sm_80 alone: on a newer GPU that
  // one is loaded as PTX for the driver to compile.
  auto own = jit::JitTarget::of_device(ctx);
  LJ_REQUIRE_OK(own);
  auto ampere = jit::JitTarget::of_arch("sm_80");
  LJ_REQUIRE_OK(ampere);
  jit::BundleWriteOptions wo;
  wo.hint = b;
  wo.use_tuned = false;
  wo.targets = {*own};
  LJ_REQUIRE_OK(jit::write_bundle((dir / "own.ljb").string(), std::span(&g, 1), wo));
  wo.targets = {*ampere};
  LJ_REQUIRE_OK(jit::write_bundle((dir / "sm80.ljb").string(), std::span(&g, 1), wo));

  exec::BuildOptions compiled;
  compiled.hint = b;
  compiled.use_tuned = false;
  auto ec = exec::Executable::build(ctx, g, compiled);
  LJ_REQUIRE_OK(ec);
  for (const char* file : {"own.ljb", "sm80.ljb"}) {
    INFO("bundle " << file);
    auto read = jit::Bundle::read((dir / file).string());
    LJ_REQUIRE_OK(read);
    exec::BuildOptions from = compiled;
    from.bundle = std::make_shared<const jit::Bundle>(std::move(*read));
    const int64_t nvrtc = rt::nvrtc_compile_count();
    auto eb = exec::Executable::build(ctx, g, from);
    LJ_REQUIRE_OK(eb);
    CHECK(rt::nvrtc_compile_count() == nvrtc);
    const bool ptx = std::string_view(file) == "sm80.ljb" && ctx.info().cc() / 10 != 8;
    for (const exec::KernelOrigin& o : eb->origins()) CHECK_THAT(o.image, Catch::StartsWith(ptx ? "PTX of sm_80" : "cubin"));
    const std::map<std::string, HostTensor> host = random_inputs(g, b, 811);
    std::vector<rt::DeviceBuffer> keep;
    run_both_against_reference(ctx, *stream, g, *eb, *ec, host, b, keep);
    // The same kernels where the bundle is this GPU's: the same bits.
    if (std::string_view(file) == "own.ljb") check_plans_agree(*stream, g, *eb, *ec, b, 1e300);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the arena reuses dead intermediates: fused plans need less than unfused ones", "[gpu][exec]") {
  rt::Context& ctx = lj_test::gpu();
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  Bindings b;
  b.set("T", 4096);
  exec::BuildOptions fused, unfused;
  fused.hint = unfused.hint = b;
  unfused.fusion.fuse = false;
  auto ef = exec::Executable::build(ctx, g, fused);
  auto eu = exec::Executable::build(ctx, g, unfused);
  LJ_REQUIRE_OK(ef);
  LJ_REQUIRE_OK(eu);
  const exec::MemoryPlan mf = ef->memory_plan(b), mu = eu->memory_plan(b);
  INFO("fused arena " << mf.arena_bytes << ", unfused arena " << mu.arena_bytes << " (" << mu.unshared_bytes << " unshared)");
  CHECK(mf.arena_bytes < mu.arena_bytes);
  CHECK(mu.arena_bytes < mu.unshared_bytes);
}

TEST_CASE("executable errors name the value: unbound input, bound intermediate, missing symbol", "[gpu][exec]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = llama_prefill(LlamaConfig::small());
  auto e = exec::Executable::build(ctx, g, {});
  LJ_REQUIRE_OK(e);
  Bindings b;
  b.set("T", 5);
  rt::Status s = e->run(*stream, b);
  REQUIRE(!s.ok());
  CHECK(s.message().find("is not bound") != std::string::npos);
  ValueId qkv = -1;
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].name == "qkv") qkv = static_cast<ValueId>(i);
  REQUIRE(qkv >= 0);
  rt::Status bad = e->bind(qkv, 0);
  REQUIRE(!bad.ok());
  CHECK(bad.message().find("%qkv of @llama_small_prefill is an intermediate") != std::string::npos);
  rt::Status nosym = e->run(*stream, Bindings{});
  REQUIRE(!nosym.ok());
  CHECK(nosym.message().find("symbol T has no value") != std::string::npos);
}

TEST_CASE("a captured CUDA graph of the plan replays to the eager run's outputs bit for bit", "[gpu][exec]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = llama_decode(LlamaConfig::small());
  Bindings b;
  b.set("B", 2);
  b.set("C", 9);
  auto e = exec::Executable::build(ctx, g, {});
  LJ_REQUIRE_OK(e);
  std::vector<rt::DeviceBuffer> keep;
  uint64_t seed = 40;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    HostTensor t(info.type.dtype, resolve(info.type.shape, b));
    if (info.type.dtype == DType::I32) {
      for (double& x : t.data) x = 8;  // the last slot of the 9-entry caches
    } else {
      fill_uniform(t, ++seed, -0.5, 0.5);
    }
    keep.push_back(upload_and_bind(ctx, *stream, *e, v, t));
  }
  LJ_REQUIRE_OK(e->run(*stream, b));
  auto eager = e->download(*stream, g.outputs()[0], b);
  LJ_REQUIRE_OK(eager);
  auto graph = e->capture(*stream, b);
  LJ_REQUIRE_OK(graph);
  CHECK(graph->launch_count() == e->launches_per_run());  // weight preparation is not part of a call
  LJ_REQUIRE_OK(rt::fill_poison(*stream, *e->buffer_address(g.outputs()[0], b), static_cast<size_t>(eager->numel() * 2), 2));
  LJ_REQUIRE_OK(graph->replay(*stream));
  auto replayed = e->download(*stream, g.outputs()[0], b);
  LJ_REQUIRE_OK(replayed);
  CHECK(replayed->data == eager->data);
}

TEST_CASE("the prefill layer's returned %v is a copy in its own buffer: bindable, equal to v bit for bit", "[gpu][exec]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = llama_prefill(LlamaConfig::small());
  Bindings b;
  b.set("T", 33);
  ValueId v = -1;
  size_t v_index = 0;  // its place among the outputs (the reference returns them in order)
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (g.value(g.outputs()[i]).name == "v") v = g.outputs()[v_index = i];
  REQUIRE(v >= 0);
  std::map<std::string, HostTensor> host;
  uint64_t seed = 60;
  for (ValueId in : g.inputs()) {
    const ValueInfo& info = g.value(in);
    HostTensor t(info.type.dtype, resolve(info.type.shape, b));
    if (info.type.dtype == DType::I32) {
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>(i);  // positions 0..T-1
    } else {
      const double range = info.is_param && info.type.rank() >= 2 ? 0.05 : 1.0;  // weights scaled as initialised
      fill_uniform(t, ++seed, -range, range);
    }
    host[info.name] = std::move(t);
  }
  // The fused plan stores %v in a buffer of its own from the QKV projection's epilogue; the unfused
  // plan leaves it a view of %qkv. Both run the same rms_norm and QKV kernels (norms kept: a folded
  // norm rounds differently), so v must match bit for bit.
  std::vector<rt::DeviceBuffer> keep;
  auto build_and_run = [&](bool fuse, bool bind_v) {
    exec::BuildOptions bo;
    bo.hint = b;
    bo.use_cache = false;
    bo.fusion.fuse = fuse;
    bo.fusion.fold_norms = false;
    auto e = exec::Executable::build(ctx, g, bo);
    LJ_REQUIRE_OK(e);
    for (ValueId in : g.inputs()) keep.push_back(upload_and_bind(ctx, *stream, *e, in, host.at(g.value(in).name)));
    if (bind_v) {
      // A copy is an output of its own: the caller may bind it (poisoned, so a row the kernel
      // skipped shows). Left a view, %v was %qkv's memory and binding it was refused.
      const size_t bytes = static_cast<size_t>(numel(resolve(g.value(v).type.shape, b)) * dtype_bytes(g.value(v).type.dtype));
      auto buf = rt::DeviceBuffer::allocate(ctx, bytes);
      LJ_REQUIRE_OK(buf);
      LJ_REQUIRE_OK(rt::fill_poison(*stream, buf->ptr(), bytes, 2));
      LJ_REQUIRE_OK(e->bind(v, buf->ptr()));
      CHECK(e->memory_plan(b).offset.count(v) == 0);  // the caller's memory, not the arena's
      keep.push_back(std::move(*buf));
    }
    LJ_REQUIRE_OK(e->run(*stream, b));
    LJ_REQUIRE_OK(stream->synchronize());
    auto got = e->download(*stream, v, b);
    LJ_REQUIRE_OK(got);
    return std::move(*got);
  };
  const HostTensor copied = build_and_run(true, true), in_arena = build_and_run(true, false), view = build_and_run(false, false);
  CHECK(copied.data == view.data);
  CHECK(in_arena.data == view.data);
  const HostTensor want = run_reference(g, host, b)[v_index];
  REQUIRE(want.data.size() == copied.data.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    worst = std::max(worst, std::fabs(copied.data[i] - want.data[i]));
    scale = std::max(scale, std::fabs(want.data[i]));
  }
  INFO("%v: max |error| " << worst << " of max |value| " << scale);
  CHECK(worst <= scale / 32);
}

TEST_CASE("one executable runs at a smaller size after a larger one: split-K counters start from zero", "[gpu][exec]") {
  // Split GEMMs (M = 128's defaults: split-K on any sm_90a, mma.sync tiles elsewhere) and split-KV
  // attention keep completion counters after the partials of gridDim.x CTAs: a smaller grid after a
  // larger one must not count from an old partial (the executable zeroes the scratch when its size
  // changes).
  const Module m = parse_module(R"(
graph @mm(%x: bf16[T, 1024], %w: param bf16[1000, 1024]) {
  %y = matmul(%x, %w)
  return %y
}
)",
                                "<split sizes>");
  const Graph& g = m.graphs[0];
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  exec::BuildOptions bo;
  bo.hint.set("T", 128);
  bo.use_cache = false;
  bo.use_tuned = false;
  auto e = exec::Executable::build(ctx, g, bo);
  LJ_REQUIRE_OK(e);
  uint64_t seed = 60;
  for (int64_t t : {300, 100, 300, 7}) {
    Bindings b;
    b.set("T", t);
    INFO("T = " << t);
    const std::map<std::string, HostTensor> host = random_inputs(g, b, ++seed);
    std::vector<rt::DeviceBuffer> keep;
    for (ValueId v : g.inputs()) keep.push_back(upload_and_bind(ctx, *stream, *e, v, host.at(g.value(v).name)));
    LJ_REQUIRE_OK(e->run(*stream, b));
    LJ_REQUIRE_OK(stream->synchronize());
    check_outputs(*stream, g, *e, b, run_reference(g, host, b));
  }
}

namespace {

// The W8A8 layer of examples/llama3_8b_w8a8.lj at a small size: hidden 256, 4 query heads and 2 KV
// heads of 64, an MLP of 512 (its numbers replaced in order, so that no new one is replaced again).
// Read from the working directory's examples/ (a build copied to a GPU machine runs from the copy of
// the tree), else from the source tree it was built in.
// examples/<file> (a Llama-3-8B-shaped layer) cut down to a small layer: 4 heads of 64, 2 KV heads,
// hidden 256, MLP 512.
Module small_example_layer(const std::string& file) {
  const std::string rel = "examples/" + file, built = std::string(LAYERJIT_SOURCE_DIR) + "/" + rel;
  std::ifstream in(rel);
  if (!in) in.open(built);
  INFO("neither ./" << rel << " nor " << built << " could be read");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{", 32, 128]", ", 4, 64]"}, {", 8, 128]", ", 2, 64]"},
                                                                                 {"dim = 128", "dim = 64"}, {"1024", "128"}, {"28672", "1024"},
                                                                                 {"14336", "512"}, {"6144", "512"}, {"4096", "256"}})
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return parse_module(s, "<small " + file + ">");
}

Module small_w8a8_layer() { return small_example_layer("llama3_8b_w8a8.lj"); }

// For an fp8 layer (`file` names fp8), an adjustment of random_inputs' values: fp8 weights of
// [-0.05, 0.05) with per-tensor scales near 1 (random_inputs' f32 vectors are W8A8's per-channel
// scales, tiny against codes of +-127), so the projections are as large as bf16 ones.
std::function<void(std::map<std::string, HostTensor>&)> scales_near_one(const std::string& file, uint64_t seed) {
  const bool fp8 = file.find("fp8") != std::string::npos;
  return [fp8, seed](std::map<std::string, HostTensor>& host) mutable {
    for (auto& [name, t] : host)
      if (fp8 && name.rfind("s_", 0) == 0 && t.numel() == 1) fill_uniform(t, ++seed, 0.5, 1.5);
  };
}

}  // namespace

TEST_CASE("the W8A8 layer (i8 projections, per-token and per-channel scales) runs end to end and matches the CPU reference",
          "[gpu][exec][int8]") {
  const Module m = small_w8a8_layer();
  REQUIRE(m.graphs.size() == 2);
  Bindings pre;
  pre.set("T", 33);
  Bindings dec;
  dec.set("B", 3);
  dec.set("C", 9);
  Bindings one;
  one.set("B", 1);
  one.set("C", 17);
  // Prefill at 33 rows (the mma.sync GEMM; the Hopper GEMM on sm_90a), decode at 3 rows (16-row
  // tiles) and at one (the GEMV, with the rope_table in the QKV group).
  check_against_reference(m.graphs[0], pre, 41);
  check_against_reference(m.graphs[1], dec, 42);
  check_against_reference(m.graphs[1], one, 43);
}

TEST_CASE("activation-quantize prologues: at B = 1 the fp8 and W8A8 GEMVs quantize x themselves and match the reference",
          "[gpu][exec][fp8][int8]") {
  for (const char* file : {"llama3_8b_fp8.lj", "llama3_8b_w8a8.lj"}) {
    INFO(file);
    const Module m = small_example_layer(file);
    // The four quantize kernels (two with their RMSNorm) and the rope_table join the projections:
    // 5 kernels against 10. The same per-element quantization; the scales differ only in the order
    // of the block sums.
    CHECK(check_one_row_prologues(m.graphs.at(1), 17, 5, 900, 64, scales_near_one(file, 950)) == 5);
  }
}

TEST_CASE("quantize prologues up to N rows: at B = 1 the QKV, o and down GEMVs quantize x themselves, gate/up keeps its row kernel",
          "[gpu][exec][fp8][int8]") {
  for (const char* file : {"llama3_8b_fp8.lj", "llama3_8b_w8a8.lj"}) {
    INFO(file);
    const Module m = small_example_layer(file);
    // The small layer's W rows: QKV 512, o 256, gate/up 1024, down 256. At most 512: three quantize
    // kernels (QKV's with its RMSNorm) and the rope_table join their projections, 6 kernels against
    // 10; the weights' first steps go out before the wait, then each CTA quantizes the row it read
    // once into shared memory.
    CHECK(check_one_row_prologues(m.graphs.at(1), 17, 4, 1010, 64, scales_near_one(file, 1020),
                                  [](FusionOptions& fo) { fo.quantize_prologue_rows = 512; }) == 6);
  }
}

TEST_CASE("row tails (opt-in): at B = 1 the fp8 and W8A8 GEMVs' last CTAs normalise and quantize the row for the next, two kernels fewer",
          "[gpu][exec][fp8][int8]") {
  for (const char* file : {"llama3_8b_fp8.lj", "llama3_8b_w8a8.lj"}) {
    INFO(file);
    const Module m = small_example_layer(file);
    // The rope_table joins QKV, the norm + quantize after o and the quantize after gate/up run in
    // those GEMVs' last CTAs: 7 kernels against 10. The same executable runs
    // B = 1 then B = 2, so a completion counter left unreset would show as a stale row of codes.
    // (Rows of 256 and 512: the row kernels take 32 and 64 threads, the GEMVs' tails 256, most of
    // them past the row; the norm's sum adds in another order.)
    CHECK(check_one_row_prologues(m.graphs.at(1), 17, 3, 980, 64, scales_near_one(file, 970),
                                  [](FusionOptions& fo) { fo.row_tails = true; }) == 7);
  }
}

#include "jit/compile_plan.h"

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "cache/location.h"
#include "cache/tuning_db.h"
#include "codegen/collective_call.h"
#include "codegen/kernel_family.h"
#include "jit/bundle.h"
#include "compiler/dump.h"
#include "jit/tuned_config.h"

namespace lj::jit {

Lowered plan(const Graph& g, const FusionOptions& fo, const Bindings& hint) {
  g.check_sizes(hint);
  g.check_sizes(fo.sizes);
  FusionOptions sized = fo;
  if (sized.sizes.values.empty()) sized.sizes = hint;  // the sizes the kernels are chosen for decide the one-row prologues too
  Lowered l = lower(g, sized);
  if (dump_enabled(DumpStage::Fusion)) dump(DumpStage::Fusion, "@" + g.name(), print_plan(*l.graph, l.plan, hint, &g));
  return l;
}

namespace {

bool has_config(GroupKind k) {
  const KernelFamily* f = kernel_family(k);
  return f && f->tunable();
}

// The emission options of one group and where its config comes from: a given config, else the
// tuning DB's record for the bucket where one applies, else the emitter's default.
CompiledGroup choose(const Graph& g, const FusionGroup& grp, const EmitOptions& base, const PlanCompileOptions& o, const JitTarget& t,
                     cache::TuningDb* db, const Bindings& bucketed, EmitOptions& eo) {
  CompiledGroup out;
  out.group = grp.id;
  out.config_source = "default";
  eo = base;
  if (grp.kind == GroupKind::Matmul && o.matmul) eo.matmul = o.matmul;
  if (grp.kind == GroupKind::Attention && o.attention) eo.attention = o.attention;
  if (eo.matmul || eo.attention) {
    out.origin = ConfigOrigin::Given;
    out.config_source = "given";
    return out;
  }
  if (!has_config(grp.kind) || !db) return out;
  if (std::optional<cache::TuningRecord> rec = db->lookup(tuning_key(t, g, grp, bucketed))) {
    const std::string why = apply_config(g, grp, rec->winner.config, eo);
    if (why.empty()) {
      out.origin = ConfigOrigin::Tuned;
      out.config_source = fmt::format("tuned ({})", bucket_text(g, bucketed));
    } else {
      out.config_source = fmt::format("default (the stored tuning '{}' does not apply: {})", rec->winner.config, why);
    }
  }
  return out;
}

// A plan from an AOT bundle: every group emitted with the config the bundle recorded, its image the
// bundle's (under the key of the kernel emitted here), nothing compiled.
rt::Result<CompiledPlan> from_bundle(const JitTarget& t, const Graph& g, const FusionPlan& plan, const PlanCompileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  LJ_RT_ASSIGN(const BundlePlan* bp, find_bundle_plan(*o.bundle, g, plan, o.hint, t));
  CompiledPlan out;
  out.target = t;
  const EmitOptions base = t.emit_options(o.hint);
  for (const FusionGroup& grp : plan.groups) {
    if (o.only_group && grp.id != *o.only_group) continue;
    if (is_collective(grp.kind)) {
      out.collectives.push_back(collective_call(g, grp));
      continue;
    }
    const BundleKernel* bk = nullptr;
    for (const BundleKernel& k : bp->kernels)
      if (k.group == grp.id) bk = &k;
    if (!bk) return rt::Error{fmt::format("bundle {}: its plan of @{} has no kernel for fusion group {}", o.bundle->path, g.name(), grp.id)};
    CompiledGroup cg;
    cg.group = grp.id;
    cg.origin = ConfigOrigin::Bundle;
    cg.config_source = bk->config_source + " (bundle)";
    EmitOptions eo = base;
    if (!bk->config.empty()) {
      if (const std::string why = apply_config(g, grp, bk->config, eo); !why.empty())
        return rt::Error{fmt::format("bundle {}: fusion group {}'s config '{}' does not apply here: {}", o.bundle->path, grp.id, bk->config, why)};
    }
    cg.kernel = emit_group(g, grp, eo);
    dump(DumpStage::Source, cg.kernel.name, cg.kernel.source);
    LJ_RT_ASSIGN(cg.compiled, bundle_kernel(*o.bundle, *bp, cg.kernel, t.target, o.bundle_ptx));
    if (o.want_ptx) dump(DumpStage::Ptx, cg.kernel.name, cg.compiled.program.ptx);
    out.groups.push_back(std::move(cg));
  }
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

namespace {

// Chooses and emits every group of one plan (no NVRTC).
CompiledPlan emit_plan(const JitTarget& t, const Graph& g, const FusionPlan& plan, const PlanCompileOptions& o) {
  CompiledPlan out;
  out.target = t;
  const EmitOptions base = t.emit_options(o.hint);
  // Tuning records are keyed by the driver: without one (no device) none can apply.
  std::unique_ptr<cache::TuningDb> db;
  if (o.use_tuned && !t.driver_version.empty()) {
    db = cache::TuningDb::open(cache::cache_options_from_env());
    if (!db->enabled()) db.reset();
  }
  const Bindings bucketed = bucket(o.hint);
  for (const FusionGroup& grp : plan.groups) {
    if (o.only_group && grp.id != *o.only_group) continue;
    if (is_collective(grp.kind)) {
      out.collectives.push_back(collective_call(g, grp));
      continue;
    }
    if (!has_emitter(grp.kind) && o.skip_ungenerated) {
      out.not_generated.push_back(NotGenerated{grp.id, grp.kind, "kernel generator not written yet"});
      continue;
    }
    EmitOptions eo;
    CompiledGroup cg = choose(g, grp, base, o, t, db.get(), bucketed, eo);
    cg.kernel = emit_group(g, grp, eo);
    dump(DumpStage::Source, cg.kernel.name, cg.kernel.source);
    out.groups.push_back(std::move(cg));
  }
  return out;
}

}  // namespace

rt::Result<CompiledPlan> compile_plan(const JitTarget& t, const Graph& g, const FusionPlan& plan, const PlanCompileOptions& o) {
  const PlanToCompile one{&g, &plan};
  std::vector<rt::Result<CompiledPlan>> out = compile_plans(t, std::span(&one, 1), o);
  return std::move(out.front());
}

std::vector<rt::Result<CompiledPlan>> compile_plans(const JitTarget& t, std::span<const PlanToCompile> plans, const PlanCompileOptions& o) {
  std::vector<rt::Result<CompiledPlan>> out;
  if (o.bundle) {
    for (const PlanToCompile& p : plans) out.push_back(from_bundle(t, *p.graph, *p.plan, o));
    return out;
  }
  std::vector<CompiledPlan> emitted;
  for (const PlanToCompile& p : plans) emitted.push_back(emit_plan(t, *p.graph, *p.plan, o));
  if (!o.compile) {
    for (CompiledPlan& e : emitted) out.push_back(std::move(e));
    return out;
  }
  // Every plan's kernels in one batch: one pool of workers, started once, packs the big kernels of
  // all the graphs (compile_parallel takes the longest first) instead of each graph ending on its own tail.
  std::vector<GeneratedKernel> kernels;
  for (const CompiledPlan& e : emitted)
    for (const CompiledGroup& cg : e.groups) kernels.push_back(cg.kernel);
  KernelCompileOptions ko;
  ko.want_ptx = o.want_ptx;
  ko.progress = o.progress;
  std::optional<cache::KernelCache> own;
  if (o.use_cache) {
    if (!o.cache) own.emplace(cache::DiskCache::open(cache::cache_options_from_env()));
    ko.cache = o.cache ? o.cache : &*own;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto results = compile_kernels(kernels, t.target, ko);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t next = 0;
  for (CompiledPlan& e : emitted) {
    e.compile_seconds = seconds;
    std::optional<rt::Error> failed;
    for (CompiledGroup& cg : e.groups) {
      rt::Result<CompiledKernel>& r = results[next++];
      if (!r.ok()) {
        if (!failed) failed = r.error();
        continue;
      }
      cg.compiled = std::move(*r);
      e.cache_hits += cg.compiled.cache_hit ? 1 : 0;
      if (o.want_ptx) dump(DumpStage::Ptx, cg.kernel.name, cg.compiled.program.ptx);
    }
    if (failed) {
      out.push_back(std::move(*failed));
    } else {
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<rt::Result<CompiledPlan>> compile_plans(const JitTarget& t, std::span<const Lowered> lowered, const PlanCompileOptions& o) {
  std::vector<PlanToCompile> plans;
  for (const Lowered& l : lowered) plans.push_back({l.graph.get(), &l.plan});
  return compile_plans(t, std::span<const PlanToCompile>(plans), o);
}

}  // namespace lj::jit

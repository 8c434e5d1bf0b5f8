#include "jit/bundle.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cache/format.h"
#include "cache/location.h"
#include "cache/tuning_db.h"
#include "jit/bundle_file.h"
#include "jit/compile_plan.h"
#include "jit/tuned_config.h"
#include "layerjit/text.h"

namespace lj::jit {

namespace {

using json = nlohmann::json;

// A manifest field missing or of the wrong type: the message names where.
struct BadManifest {
  std::string what;
};

const json& field(const json& obj, const char* name, const std::string& where) {
  if (!obj.is_object() || !obj.contains(name)) throw BadManifest{fmt::format("{} has no '{}'", where, name)};
  return obj[name];
}
std::string get_string(const json& obj, const char* name, const std::string& where) {
  const json& f = field(obj, name, where);
  if (!f.is_string()) throw BadManifest{fmt::format("{}.{} is not a string", where, name)};
  return f.get<std::string>();
}
int64_t get_int(const json& obj, const char* name, const std::string& where) {
  const json& f = field(obj, name, where);
  if (!f.is_number_integer()) throw BadManifest{fmt::format("{}.{} is not an integer", where, name)};
  return f.get<int64_t>();
}
const json& get_array(const json& obj, const char* name, const std::string& where) {
  const json& f = field(obj, name, where);
  if (!f.is_array()) throw BadManifest{fmt::format("{}.{} is not a list", where, name)};
  return f;
}
size_t get_index(const json& obj, const char* name, const std::string& where, size_t count) {
  const int64_t v = get_int(obj, name, where);
  if (v < 0 || static_cast<uint64_t>(v) >= count) throw BadManifest{fmt::format("{}.{} = {} is out of range (0..{})", where, name, v, count)};
  return static_cast<size_t>(v);
}

// The fusion groups as the planner drew them: what the fusion options decided beyond the graph.
std::string plan_hash(const FusionPlan& plan) {
  std::string text;
  for (const FusionGroup& grp : plan.groups) {
    text += fmt::format("{}:{}:{}:", grp.id, group_kind_name(grp.kind), grp.prepare ? 1 : 0);
    for (NodeId n : grp.nodes) text += fmt::format("{},", n);
    text += ';';
  }
  return cache::checksum(text);
}

std::string graph_hash(const Graph& g) { return cache::checksum(print_graph(g)); }

std::string archs_text(const Bundle& b) {
  std::string out;
  for (const BundleTarget& t : b.targets) out += (out.empty() ? "" : ", ") + t.arch;
  return out;
}

}  // namespace

std::string hint_text(const Graph& g, const Bindings& hint) {
  std::string out;
  for (const std::string& s : g.symbols())
    if (auto v = hint.get(s)) out += fmt::format("{}{}={}", out.empty() ? "" : ",", s, *v);
  return out;
}

rt::Result<Bundle> Bundle::read(const std::string& path) {
  LJ_RT_ASSIGN(BundleFile f, read_bundle_file(path));
  Bundle b;
  b.path = path;
  b.payloads = std::move(f.payloads);
  const json& m = f.manifest;
  try {
    b.layerjit_version = get_string(m, "layerjit", "the manifest");
    b.nvrtc_version = get_string(m, "nvrtc", "the manifest");
    b.device_headers_hash = get_string(m, "device_headers", "the manifest");
    b.created_unix = get_int(m, "created_unix", "the manifest");
    const json& env = get_array(m, "env", "the manifest");
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string where = fmt::format("env[{}]", i);
      cache::EnvSetting s;
      s.name = get_string(env[i], "name", where);
      const json& v = field(env[i], "value", where);
      if (!v.is_null() && !v.is_string()) throw BadManifest{where + ".value is neither a string nor null"};
      if (v.is_string()) s.value = v.get<std::string>();
      b.env.push_back(std::move(s));
    }
    const json& targets = get_array(m, "targets", "the manifest");
    for (size_t i = 0; i < targets.size(); ++i) {
      const std::string where = fmt::format("targets[{}]", i);
      BundleTarget t;
      t.arch = get_string(targets[i], "arch", where);
      auto parsed = rt::Target::parse(t.arch);
      if (!parsed.ok() || parsed->ptx_only) throw BadManifest{fmt::format("{}.arch '{}' is not a cubin arch", where, t.arch)};
      t.sm_count = static_cast<int>(get_int(targets[i], "sm_count", where));
      t.max_shared_bytes = static_cast<int>(get_int(targets[i], "max_shared_bytes", where));
      t.driver_version = get_string(targets[i], "driver", where);
      b.targets.push_back(std::move(t));
    }
    const json& plans = get_array(m, "plans", "the manifest");
    for (size_t i = 0; i < plans.size(); ++i) {
      const std::string where = fmt::format("plans[{}]", i);
      BundlePlan p;
      p.graph = get_string(plans[i], "graph", where);
      p.graph_hash = get_string(plans[i], "graph_hash", where);
      p.plan_hash = get_string(plans[i], "plan_hash", where);
      p.hint = get_string(plans[i], "hint", where);
      p.target = get_index(plans[i], "target", where, b.targets.size());
      const json& kernels = get_array(plans[i], "kernels", where);
      for (size_t j = 0; j < kernels.size(); ++j) {
        const std::string kw = fmt::format("{}.kernels[{}]", where, j);
        BundleKernel k;
        k.group = static_cast<int>(get_int(kernels[j], "group", kw));
        k.name = get_string(kernels[j], "name", kw);
        k.config = get_string(kernels[j], "config", kw);
        k.config_source = get_string(kernels[j], "config_source", kw);
        k.tuned = get_string(kernels[j], "tuned", kw);
        const std::string key = get_string(kernels[j], "key", kw);
        auto parsed = cache::CacheKey::from_hex(key);
        if (!parsed) throw BadManifest{fmt::format("{}.key '{}' is not 32 hex digits", kw, key)};
        k.key = *parsed;
        k.cubin = get_index(kernels[j], "cubin", kw, b.payloads.size());
        k.ptx = get_index(kernels[j], "ptx", kw, b.payloads.size());
        p.kernels.push_back(std::move(k));
      }
      b.plans.push_back(std::move(p));
    }
  } catch (const BadManifest& e) {
    return rt::Error{fmt::format("bundle {}: the manifest is malformed: {}", path, e.what)};
  }
  return b;
}

rt::Status Bundle::check_compatible() const {
  if (layerjit_version != cache::layerjit_version())
    return rt::Error{fmt::format("bundle {} was written by layerjit {}, this is layerjit {}: its kernels are not the ones this version "
                                 "generates; write it again (layerjit bundle)",
                                 path, layerjit_version, cache::layerjit_version())};
  if (device_headers_hash != current_device_headers_hash())
    return rt::Error{fmt::format("bundle {} was compiled with other device headers (hash {}, here {}; LAYERJIT_DEVICE_HEADERS?): write "
                                 "it again with these",
                                 path, device_headers_hash, current_device_headers_hash())};
  if (env != cache::capture_code_env()) return rt::Error{fmt::format("bundle {} was written under other code-changing environment variables", path)};
  return {};
}

std::string Bundle::describe() const {
  std::string out = fmt::format("bundle {}: layerjit {}, NVRTC {}, {} target(s), {} plan(s), {} payload(s)\n", path, layerjit_version,
                                nvrtc_version, targets.size(), plans.size(), payloads.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const BundleTarget& t = targets[i];
    out += fmt::format("  target {}: {} ({} SMs, {} KiB shared memory per block{})\n", i, t.arch, t.sm_count, t.max_shared_bytes / 1024,
                       t.driver_version.empty() ? ", written without its GPU: default configs" : ", driver " + t.driver_version);
  }
  for (const BundlePlan& p : plans) {
    out += fmt::format("  @{} for {} at {}: {} kernels\n", p.graph, targets[p.target].arch, p.hint.empty() ? "no sizes" : p.hint,
                       p.kernels.size());
    for (const BundleKernel& k : p.kernels)
      out += fmt::format("    group {} {}{} ({}{}), cubin {} B, PTX {} B\n", k.group, k.name, k.config.empty() ? "" : " '" + k.config + "'",
                         k.config_source, k.tuned.empty() ? "" : ": " + k.tuned, payloads[k.cubin].size(), payloads[k.ptx].size());
  }
  return out;
}

rt::Result<BundleChoice> choose_bundle_target(const Bundle& b, int cc, bool arch_specific) {
  std::optional<BundleChoice> best;
  int best_rank = 0, best_sm = 0;
  for (size_t i = 0; i < b.targets.size(); ++i) {
    const rt::Target t = rt::Target::parse(b.targets[i].arch).value();  // checked when read
    // rank: 4 exact arch-specific, 3 exact, 2 same major and lower minor (cubin), 1 PTX of an older arch
    int rank = 0;
    if (t.arch_specific) {
      if (arch_specific && t.sm == cc) rank = 4;
    } else if (t.sm == cc) {
      rank = 3;
    } else if (t.sm / 10 == cc / 10 && t.sm < cc) {
      rank = 2;
    } else if (t.sm < cc) {
      rank = 1;
    }
    if (rank == 0 || rank < best_rank || (rank == best_rank && t.sm <= best_sm)) continue;
    best_rank = rank;
    best_sm = t.sm;
    static const char* const kWhy[] = {"", "PTX of {} (the driver compiles it for this GPU)", "cubin {} (binary compatible with this GPU)",
                                       "cubin {} (this GPU's arch)", "cubin {} (this GPU's arch)"};
    best = BundleChoice{i, rank == 1, fmt::format(fmt::runtime(kWhy[rank]), b.targets[i].arch)};
  }
  if (!best)
    return rt::Error{fmt::format("bundle {} holds kernels for {}, none of which runs on this GPU (sm_{}{}): a cubin runs on its own arch "
                                 "and later minors of the same major (sm_80 on sm_86), PTX on any later arch; write a bundle with "
                                 "--arch sm_{}",
                                 b.path, archs_text(b), cc, arch_specific ? "" : ", arch-specific targets not wanted", cc)};
  return *best;
}

JitTarget bundle_jit_target(const BundleTarget& t) {
  JitTarget out;
  out.target = rt::Target::parse(t.arch).value();
  out.sm_count = t.sm_count;
  out.max_shared_bytes = t.max_shared_bytes;
  out.driver_version = t.driver_version;
  return out;
}

rt::Result<const BundlePlan*> find_bundle_plan(const Bundle& b, const Graph& g, const FusionPlan& plan, const Bindings& hint,
                                               const JitTarget& t) {
  const std::string gh = graph_hash(g), ph = plan_hash(plan), ht = hint_text(g, hint), arch = t.target.name();
  std::string held;
  for (const BundlePlan& p : b.plans) {
    if (p.graph_hash == gh && p.plan_hash == ph && p.hint == ht && b.targets[p.target].arch == arch) return &p;
    if (p.graph == g.name())
      held += fmt::format("\n  @{} for {} at {}{}", p.graph, b.targets[p.target].arch, p.hint.empty() ? "no sizes" : p.hint,
                          p.graph_hash != gh                 ? " (another graph of that name, or this one lowered with other fusion options)"
                          : p.hint == ht && p.plan_hash != ph ? " (fused otherwise: other fusion options)"
                                                              : "");  // other sizes: the listing says which
  }
  return rt::Error{fmt::format("bundle {} has no plan of @{} for {} at {}{}", b.path, g.name(), arch, ht.empty() ? "no sizes" : ht,
                               held.empty() ? fmt::format("; it holds no plan of that graph") : "; it holds:" + held)};
}

rt::Result<CompiledKernel> bundle_kernel(const Bundle& b, const BundlePlan& p, const GeneratedKernel& k, const rt::Target& target, bool ptx) {
  cache::KeyComponents c = key_components(compile_job(k, target));
  c.nvrtc_version = b.nvrtc_version;  // the compiler that made the images: this machine's is not asked
  const cache::CacheKey key = cache::compute_key(c);
  for (const BundleKernel& e : p.kernels) {
    if (e.group != k.group) continue;
    if (e.key != key)
      return rt::Error{fmt::format("bundle {}: fusion group {} ({}) generates another kernel here than the bundle holds (key {}, bundle {}): "
                                   "the bundle was written from other code; write it again",
                                   b.path, k.group, k.name, key.hex(), e.key.hex())};
    CompiledKernel out;
    out.key = key;
    out.program.target = target;
    if (ptx) {
      out.program.target.ptx_only = true;
      out.program.ptx = b.payloads[e.ptx];
    } else {
      if (k.arch_specific) out.program.target.arch_specific = true;
      out.program.cubin = b.payloads[e.cubin];
      out.program.ptx = b.payloads[e.ptx];
    }
    return out;
  }
  return rt::Error{fmt::format("bundle {}: its plan of @{} has no kernel for fusion group {} ({})", b.path, p.graph, k.group, k.name)};
}

rt::Result<BundleWriteReport> write_bundle(const std::string& path, std::span<const Graph> graphs, const BundleWriteOptions& o) {
  BundleWriteReport rep;
  std::optional<cache::KernelCache> own;
  cache::KernelCache* kc = o.cache;
  if (!kc) kc = &own.emplace(cache::DiskCache::open(cache::cache_options_from_env()));
  std::unique_ptr<cache::TuningDb> db;
  if (o.use_tuned) db = cache::TuningDb::open(cache::cache_options_from_env());

  json manifest = {{"layerjit", std::string(cache::layerjit_version())},
                   {"nvrtc", rt::nvrtc_version()},
                   {"device_headers", current_device_headers_hash()},
                   {"created_unix", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()}};
  json env = json::array();
  for (const cache::EnvSetting& s : cache::capture_code_env()) env.push_back({{"name", s.name}, {"value", s.value ? json(*s.value) : json()}});
  manifest["env"] = std::move(env);
  json targets = json::array(), plans = json::array();
  std::vector<std::string> payloads;
  std::map<std::string, size_t> payload_of;  // checksum -> index: a kernel two plans share is stored once
  auto add_payload = [&](const std::string& bytes) {
    const std::string sum = cache::checksum(bytes);
    auto [it, fresh] = payload_of.emplace(sum, payloads.size());
    if (fresh) payloads.push_back(bytes);
    return it->second;
  };
  for (size_t ti = 0; ti < o.targets.size(); ++ti) {
    const JitTarget& t = o.targets[ti];
    targets.push_back({{"arch", t.target.name()}, {"sm_count", t.sm_count}, {"max_shared_bytes", t.max_shared_bytes}, {"driver", t.driver_version}});
    // Every graph's kernels for this target in one batch of compiles.
    std::vector<Lowered> lowered;
    for (const Graph& source : graphs) lowered.push_back(plan(source, o.fusion, o.hint));
    PlanCompileOptions po;
    po.hint = o.hint;
    po.use_tuned = o.use_tuned;
    po.cache = kc;
    po.want_ptx = true;
    po.progress = o.progress;
    std::vector<rt::Result<CompiledPlan>> all;
    try {
      all = compile_plans(t, lowered, po);
    } catch (const UserError& e) {
      return rt::Error{fmt::format("{}: {}", t.target.name(), e.what())};
    }
    if (!all.empty() && all.front().ok()) rep.compile_seconds += all.front()->compile_seconds;  // the batch's, once
    for (size_t gi = 0; gi < lowered.size(); ++gi) {
      const Lowered& l = lowered[gi];
      const Graph& g = *l.graph;
      rt::Result<CompiledPlan>& compiled = all[gi];
      if (!compiled.ok()) return compiled.status();
      rep.cache_hits += compiled->cache_hits;
      json kernels = json::array();
      for (const CompiledGroup& cg : compiled->groups) {
        const rt::CompiledProgram& prog = cg.compiled.program;
        if (prog.cubin.empty() || prog.ptx.empty())
          return rt::Error{fmt::format("@{} group {} ({}): the compile gave no {}", g.name(), cg.group, cg.kernel.name, prog.cubin.empty() ? "cubin" : "PTX")};
        std::string tuned;
        if (cg.origin == ConfigOrigin::Tuned && db)
          for (const FusionGroup& grp : l.plan.groups)
            if (grp.id == cg.group)
              if (auto rec = db->lookup(tuning_key(t, g, grp, bucket(o.hint))))
                tuned = fmt::format("{:.2f} us, spread {:.2f} us, {} run(s)", rec->winner.median_us, rec->winner.spread_us, rec->runs);
        kernels.push_back({{"group", cg.group},
                           {"name", cg.kernel.name},
                           {"config", cg.kernel.config},
                           {"config_source", cg.config_source},
                           {"tuned", tuned},
                           {"key", cache::compute_key(key_components(compile_job(cg.kernel, t.target))).hex()},
                           {"cubin", add_payload(prog.cubin)},
                           {"ptx", add_payload(prog.ptx)}});
        ++rep.kernels;
      }
      plans.push_back({{"graph", g.name()},
                       {"graph_hash", graph_hash(g)},
                       {"plan_hash", plan_hash(l.plan)},
                       {"hint", hint_text(g, o.hint)},
                       {"target", ti},
                       {"kernels", std::move(kernels)}});
      ++rep.plans;
    }
  }
  manifest["targets"] = std::move(targets);
  manifest["plans"] = std::move(plans);
  LJ_RT_TRY(write_bundle_file(path, manifest, payloads));
  rep.payloads = payloads.size();
  for (const std::string& p : payloads) rep.bytes += p.size();
  return rep;
}

}  // namespace lj::jit

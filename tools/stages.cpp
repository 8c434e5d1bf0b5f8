// Pipeline stages as the CLI runs them: each prints itself when LAYERJIT_DUMP asks for it.
#include "compiler/dump.h"
#include "tools/stages.h"

namespace lj::cli {

Lowered plan_graph(const Graph& g, const FusionOptions& fo, const Bindings& b) {
  Lowered l = lower(g, fo);
  if (dump_enabled(DumpStage::Fusion)) dump(DumpStage::Fusion, "@" + g.name(), print_plan(*l.graph, l.plan, b, &g));
  return l;
}

GeneratedKernel emit_kernel(const Graph& g, const FusionGroup& grp, const EmitOptions& eo) {
  GeneratedKernel k = emit_group(g, grp, eo);
  dump(DumpStage::Source, k.name, k.source);
  return k;
}

}  // namespace lj::cli

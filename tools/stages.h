// Pipeline stages as the CLI runs them (tools/stages.cpp): planning and emission, each printing
// itself when LAYERJIT_DUMP asks for it. Kept apart from cli.h so argument handling has no
// dependency on code generation.
#pragma once

#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"

namespace lj::cli {

/// lower(): the graph after its passes (norm folding) and its plan; every later stage works on
/// `.graph` (a superset of `g`'s values, ids kept).
Lowered plan_graph(const Graph& g, const FusionOptions& fo, const Bindings& b);
GeneratedKernel emit_kernel(const Graph& g, const FusionGroup& grp, const EmitOptions& eo);

}  // namespace lj::cli

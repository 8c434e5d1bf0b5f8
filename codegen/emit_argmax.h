// An argmax alone in a row group (the row-reduce family hands it here): one block per row.
#pragma once

#include <string>

#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"

namespace lj {

/// Whether `grp` is an argmax group (its one node is an argmax).
bool is_argmax_group(const Graph& g, const FusionGroup& grp);
/// Why the argmax kernel cannot implement `grp` ("" when it can).
std::string argmax_reject(const Graph& g, const FusionGroup& grp);
GeneratedKernel emit_argmax(const Graph& g, const FusionGroup& grp);

}  // namespace lj

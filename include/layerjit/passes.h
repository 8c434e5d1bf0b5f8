// Graph-to-graph passes (one free function each, one file each under compiler/passes/).
#pragma once

#include "layerjit/graph.h"

namespace lj {

/// Rebuilds `g` with every bound symbol replaced by its value, re-verifying every op (so a binding
/// that breaks a shape rule, e.g. reshape of [T, 4096] to [T, 32, 100], is reported).
Graph bind_symbols(const Graph& g, const Bindings& b);

/// RMSNorm folding: `%h = rms_norm(%x, %w)` read only by matmuls `matmul(%h, %W)` whose weights are
/// params becomes `%h.scale = rms_scale(%x)` (one f32 per row), `%W.folded = mul(%W, %w)` (computed
/// from the params alone: once, when the weights are bound) and `matmul(%x, %W.folded, %h.scale)`,
/// which scales each row's fp32 sums before rounding. %h never exists: the norm reads %x and writes
/// one float per row instead of a whole row. Every value of `g` keeps its id (new ones come after),
/// so inputs and outputs bind alike; the folded norm's result id becomes the row scale.
struct NormFolding {
  Graph graph;
  std::vector<std::string> notes;  ///< one per fold, and one per norm feeding a matmul left alone, with why
  int folded = 0;
};
NormFolding fold_norms(const Graph& g);

}  // namespace lj

// `--tp N` on the command line: the value's check, and the tensor-parallel header `layerjit plan`
// prints before a rank graph's plan (how inputs are split, the all_reduces and their bytes).
#pragma once

#include <string>

#include "layerjit/shard.h"
#include "layerjit/text.h"

namespace lj::cli {

/// N of `--tp N`: an integer in 1..64, else a UsageError naming the value.
int parse_tp(const std::string& v);

/// Replaces every graph of `m` by rank 0's graph at `tp` (shard(); tp = 1 changes nothing): what
/// `compile --tp` and `tune --tp` work on. The other ranks' kernels are the same but for the o and
/// down projections' epilogues, which do not add the residual (ShardOptions::fold_residuals). A graph that does not shard is a UserError saying why.
void shard_module(Module& m, int tp);

/// The header of a rank graph's plan: ranks, each split input, each all_reduce with its bytes per
/// call where `b` binds its sizes, and the per-rank notes of the pass.
std::string tp_summary(const ShardedGraph& s, const Bindings& b);

}  // namespace lj::cli

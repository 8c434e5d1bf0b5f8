// `layerjit run --tp N` and `layerjit bench --tp N`: a graph sharded over N GPUs of this machine
// (exec::TpExecutable: one process, a thread per rank, NCCL between them) against the same graph on
// one GPU (tp = 1, the same runtime) on the same seeded inputs. docs/tp.md.
#pragma once

#include <optional>
#include <string>

#include "exec/safetensors.h"
#include "layerjit/graph.h"
#include "tools/args.h"

namespace lj::cli {

struct TpRunOptions {
  int tp = 0;  ///< 0: --tp not given
  uint64_t seed = 1;
  /// Compare with the CPU reference of the unsharded graph too ("auto": at most 5 GFLOP).
  std::string reference = "auto";
  /// bench: no output checks, the timings only.
  bool check = true;
  bool quiet = false;
  /// ShardOptions::fold_residuals (false: `--no-residual-fold`).
  bool fold_residuals = true;
  const exec::SafetensorsFile* weights = nullptr;
};

/// Registers --tp N (o.tp) and --no-residual-fold (o.fold_residuals) on `cl`, as run and bench take them.
void tp_flags(CommandLine& cl, TpRunOptions& o);

/// Builds the graph at tp = 1 and tp = N, runs both on the same inputs, checks every output (tp = N
/// against tp = 1 within the dtype's tolerance, a replicated output equal on every rank, the CUDA
/// graph replay against the eager run bit for bit) and times, in interleaved rounds on rank 0's
/// stream, each as one CUDA graph per rank and the tp = N all_reduces alone. Returns the exit code.
int run_tp(const Graph& g, const Bindings& b, const TpRunOptions& o);

}  // namespace lj::cli

// Run-time compilation of CUDA C++ with NVRTC: source -> cubin (and PTX on request) for one target,
// with the log, the compile time and, on failure, the log mapped back onto the generated source.
// NVRTC needs no GPU, so everything here runs in CPU-only CI.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/result.h"

namespace lj::rt {

/// What NVRTC is asked to produce. sm_XY gives a cubin for exactly that GPU family; sm_XYa adds the
/// arch-specific instructions (wgmma, setmaxnreg) that run only on that exact arch; compute_XY gives
/// PTX only, which the driver JIT-compiles at load time for whatever GPU is present.
struct Target {
  int sm = 0;                  ///< 80, 90, 100, ...
  bool arch_specific = false;  ///< the `a` suffix
  bool ptx_only = false;       ///< compute_XY: PTX for the driver to JIT, no cubin

  /// "sm_90a", "sm_80" or "compute_90".
  std::string name() const;
  /// Parses "sm_90a", "sm_80", "compute_90".
  static Result<Target> parse(std::string_view text);
  bool operator==(const Target&) const = default;
};

struct CompileOptions {
  /// Name NVRTC uses for the source in its log (a fusion group's name, e.g. "group3_rms_matmul.cu").
  std::string program_name = "kernel.cu";
  /// Options after the fixed ones (-std=c++17 -default-device -lineinfo and the arch).
  std::vector<std::string> extra;
  /// In-memory headers beyond the embedded layerjit device headers: (include name, text).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Also return the PTX of a cubin compile.
  bool want_ptx = false;
  /// NVRTC automatic precompiled headers (-pch): later compiles in this process that include the
  /// same headers first reuse the parsed headers.
  bool pch = false;
  bool operator==(const CompileOptions&) const = default;
};

struct CompiledProgram {
  Target target;
  std::string cubin;  ///< empty for a ptx_only target
  std::string ptx;    ///< set for ptx_only targets and when want_ptx was asked
  std::string log;    ///< NVRTC's log (warnings), possibly empty
  double seconds = 0; ///< wall time of nvrtcCompileProgram
  std::vector<std::string> options;  ///< the full option list passed to NVRTC
  /// What to load with cuModuleLoadData: the cubin, or the PTX for a ptx_only target.
  const std::string& image() const { return target.ptx_only ? ptx : cubin; }
};

/// Options every compile gets, before the arch and the caller's extras.
std::span<const char* const> fixed_options();
/// The exact option list compile() passes to NVRTC (what a cache key must cover).
std::vector<std::string> nvrtc_options(const CompileOptions& options, const Target& target);

/// Compiles `source` for `target`. On failure the error holds, for each NVRTC error, the program
/// name and line, the enclosing kernel's name and three lines of source either side, then the raw log.
Result<CompiledProgram> compile(std::string_view source, const CompileOptions& options, const Target& target);
/// NVRTC compiles this process has made or had its compile workers make (compile_workers.h): what
/// a warm path must leave unchanged.
int64_t nvrtc_compile_count();
/// For compile_workers.cpp: `n` compiles a worker ran.
void add_worker_compiles(int64_t n);

/// The SM versions this NVRTC can compile for (nvrtcGetSupportedArchs), ascending.
Result<std::vector<int>> supported_archs();
/// "13.0".
std::string nvrtc_version();

/// Which target to compile for on a GPU of compute capability `device_cc` (90 for 9.0).
struct TargetChoice {
  Target target;
  std::string warning;  ///< non-empty when the choice is a fallback the user should know about
};
/// A device NVRTC knows gets a cubin for it (arch-specific on request). A device newer than every
/// arch NVRTC knows gets PTX for the newest one, which the driver JITs, with a warning; one older
/// than every arch is an error.
Result<TargetChoice> choose_target(int device_cc, bool want_arch_specific, std::span<const int> supported,
                                   std::string_view nvrtc_version_text);

/// One diagnostic from an NVRTC log, placed in the source.
struct CompileDiagnostic {
  std::string file;
  int line = 0;
  std::string severity;  ///< "error", "warning", "catastrophic error", ...
  std::string message;
  std::string kernel;    ///< enclosing __global__ function when the file is the program, else ""
};
/// Parses NVRTC's "file(line): severity: message" lines.
std::vector<CompileDiagnostic> parse_compile_log(std::string_view log, std::string_view source,
                                                 std::string_view program_name);
/// The failure text compile() returns: each error with kernel, line and context, then the raw log.
std::string map_compile_log(std::string_view log, std::string_view source, std::string_view program_name,
                            const Target& target);

/// One compile for compile_parallel().
struct CompileJob {
  std::string source;
  CompileOptions options;
  Target target;
  bool operator==(const CompileJob&) const = default;
};
/// A job's expected compile cost, for ordering (not a time): the bytes of its translation unit,
/// its source plus every in-memory header it includes, directly or through another (each counted
/// once; headers NVRTC finds elsewhere count nothing). Generated kernels' NVRTC time follows the
/// templates they instantiate, which is what this sees: a wgmma GEMM or attention kernel pulls in
/// ~40 KB of headers, a row kernel ~8 KB.
size_t estimated_compile_cost(const CompileJob& job);
/// The default number of compile workers: min(hardware threads, 8).
int default_compile_workers();
/// Called as each job finishes, from whichever thread finished it (serialise in the callback).
using CompileDone = std::function<void(size_t job, const Result<CompiledProgram>& result)>;
/// Compiles independent jobs: in worker processes where the worker is found (compile_workers.h),
/// else on a bounded pool of threads (workers <= 0: LAYERJIT_COMPILE_JOBS, else the default);
/// results are in job order. Jobs start in descending estimated_compile_cost, so the big kernels do
/// not trail at the end with the other workers idle. Identical jobs (source, options and target)
/// compile once and share the outcome. `done` (optional) hears of each job as it finishes.
std::vector<Result<CompiledProgram>> compile_parallel(std::span<const CompileJob> jobs, int workers = 0, const CompileDone& done = {});

}  // namespace lj::rt

// NVRTC in worker processes: a compile that crashes, hangs or runs out of memory takes down its
// worker, not the caller, and becomes that job's error; the other jobs compile. Workers are the
// layerjit-compile-worker executable (tools/compile_worker_main.cpp), spawned with posix_spawn and fed
// jobs over a socket pair (compile_wire.h); each takes one job at a time, so N workers compile N
// programs truly in parallel (NVRTC serialises much of its work across threads of one process).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/nvrtc.h"

namespace lj::rt {

struct WorkerSettings {
  std::string path;        ///< the worker executable; empty: compile in this process
  int jobs = 0;            ///< worker processes at most (0: one per hardware thread)
  double timeout_s = 300;  ///< per compile; past it the worker is killed and the job fails
};

/// From the environment: LAYERJIT_COMPILE_WORKER names the worker (a path; "off" compiles in this
/// process), else layerjit-compile-worker beside the running executable, else beside (or in ../bin
/// of) the library holding this code (liblayerjit.so, for programs and the Python module), where
/// it exists;
/// LAYERJIT_COMPILE_JOBS the number of workers; LAYERJIT_COMPILE_TIMEOUT the seconds per compile.
/// `error` (if given) receives why a set variable is malformed (the default is used then).
WorkerSettings worker_settings_from_env(std::string* error = nullptr);

/// Compiles `jobs` on worker processes (at most `s.jobs`, fewer for fewer jobs); results in job
/// order. A worker that cannot start, dies or passes the timeout gives its job an error that says
/// so; it is replaced for the next job. `done` as for compile_parallel.
std::vector<Result<CompiledProgram>> compile_in_workers(std::span<const CompileJob> jobs, const WorkerSettings& s,
                                                        const CompileDone& done = {});

}  // namespace lj::rt

// The NVRTC job for a generated kernel: its source, our embedded device headers and a program name
// that makes compile errors name the kernel (and so the fusion group).
#pragma once

#include "codegen/kernel.h"
#include "runtime/nvrtc.h"

namespace lj::rt {

CompileJob compile_job(const GeneratedKernel& k, const Target& target, bool want_ptx = false);

/// Compiles one generated kernel. On failure the message starts with the fusion group and kernel.
Result<CompiledProgram> compile_kernel(const GeneratedKernel& k, const Target& target, bool want_ptx = false);

}  // namespace lj::rt

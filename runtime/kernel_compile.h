// The NVRTC job for a generated kernel: its source, our embedded device headers and a program name
// that makes compile errors name the kernel (and so the fusion group).
#pragma once

#include "codegen/kernel.h"
#include "runtime/context.h"
#include "runtime/nvrtc.h"

namespace lj::rt {

CompileJob compile_job(const GeneratedKernel& k, const Target& target, bool want_ptx = false);

/// Emission options for `ctx`'s device compiled for `target`: the arch, the device's opt-in shared
/// memory per block and SM count, and the sizes the kernels are chosen for.
EmitOptions device_emit_options(const Context& ctx, const Target& target, const Bindings& hint);

/// Compiles one generated kernel. On failure the message starts with the fusion group and kernel.
Result<CompiledProgram> compile_kernel(const GeneratedKernel& k, const Target& target, bool want_ptx = false);

}  // namespace lj::rt

// The CLI subcommands: one function each, taking the arguments after the command name.
#pragma once

#include <string>
#include <vector>

#include "tools/cli.h"
#include "jit/compile_plan.h"

namespace lj::cli {

extern const char* const kCheckUsage;
extern const char* const kPrintUsage;
extern const char* const kPlanUsage;
extern const char* const kInspectUsage;
extern const char* const kCompileUsage;
extern const char* const kBundleUsage;
extern const char* const kDevicesUsage;
extern const char* const kTuneUsage;
extern const char* const kRunUsage;
extern const char* const kBenchUsage;
extern const char* const kGenerateUsage;

/// The JIT target of `--arch` (tools/cmd_compile.cpp): a GPU's own (SMs, shared memory, driver, so
/// its tuned configs apply) where this machine has one of that arch, else the arch alone. A
/// malformed arch is a UsageError.
jit::JitTarget target_for_arch(const std::string& arch);
/// No --arch (nullopt): GPU 0's target where there is one, else sm_90a; stderr says which.
jit::JitTarget target_for_arch(const std::optional<std::string>& arch);

int cmd_check(const std::vector<std::string>& args);
int cmd_print(const std::vector<std::string>& args);
int cmd_plan(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);
int cmd_compile(const std::vector<std::string>& args);
/// `layerjit bundle`: writes or verifies an AOT bundle (no GPU needed).
int cmd_bundle(const std::vector<std::string>& args);
/// `layerjit tune` (needs a GPU): autotunes the plan's matmul groups.
int cmd_tune(const std::vector<std::string>& args);
/// `layerjit run` (needs a GPU): the fused and unfused plans on the same inputs, checked.
int cmd_run(const std::vector<std::string>& args);
/// `layerjit bench` (needs a GPU): ceilings, per-kernel roofline, the layer unfused / fused / graph.
int cmd_bench(const std::vector<std::string>& args);
/// `layerjit generate`: greedy generation over a Hugging Face model (--cpu: the CPU reference).
int cmd_generate(const std::vector<std::string>& args);
/// `layerjit devices` (tools/cmd_devices.cpp), adapted to the argument vector.
int cmd_devices_args(const std::vector<std::string>& args);

}  // namespace lj::cli

#include "runtime/kernel_resources.h"

#include <charconv>

#include <fmt/format.h>


namespace lj::rt {

namespace {

// The integer right before `unit` in `line` ("168 registers" -> 168), if `unit` occurs.
std::optional<int64_t> number_before(std::string_view line, std::string_view unit) {
  const size_t at = line.find(unit);
  if (at == std::string_view::npos || at < 2) return std::nullopt;
  size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(line.data() + begin, line.data() + end, v);
  if (ec != std::errc() || begin == end) return std::nullopt;
  return v;
}

}  // namespace

std::string KernelResources::str() const {
  std::string spill = spills() ? fmt::format("spills ({} bytes stored, {} loaded)", spill_store_bytes, spill_load_bytes) : "no spills";
  return fmt::format("{} registers, {}, {} bytes stack, {} bytes static shared memory, {} barrier{}{}{}", registers, spill, stack_bytes,
                     static_shared_bytes, barriers, barriers == 1 ? "" : "s", setmaxnreg_ignored ? "; setmaxnreg ignored by ptxas" : "",
                     wgmma_serialized ? "; wgmma serialized by ptxas" : "");
}

std::optional<KernelResources> parse_ptxas_info(std::string_view log, std::string_view kernel) {
  const std::string entry = fmt::format("Compiling entry function '{}'", kernel);
  const size_t start = log.find(entry);
  if (start == std::string_view::npos) return std::nullopt;
  size_t end = log.find("Compiling entry function", start + entry.size());
  std::string_view block = log.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  KernelResources r;
  bool used = false;
  size_t pos = 0;
  while (pos < block.size()) {
    size_t nl = block.find('\n', pos);
    std::string_view line = block.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? block.size() : nl + 1;
    if (line.find("bytes stack frame") != std::string_view::npos) {
      r.stack_bytes = number_before(line, "bytes stack frame").value_or(0);
      r.spill_store_bytes = number_before(line, "bytes spill stores").value_or(0);
      r.spill_load_bytes = number_before(line, "bytes spill loads").value_or(0);
    } else if (line.find("Used ") != std::string_view::npos && line.find("registers") != std::string_view::npos) {
      used = true;
      r.registers = static_cast<int>(number_before(line, "registers").value_or(0));
      r.barriers = static_cast<int>(number_before(line, "barriers").value_or(0));
      r.static_shared_bytes = number_before(line, "bytes smem").value_or(0);
    }
  }
  if (!used) return std::nullopt;
  // ptxas 12.x-13.x writes its performance-loss notes ahead of the entries, naming the function
  // or not: "(C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum register
  // requirements." (C7508: "... ignored; unable to determine register count at entry."), "(C7511)
  // Potential Performance Loss: wgmma.mma_async instructions are serialized due to ... in the
  // function 'name'". One that names no function counts against every entry of the log (layerjit
  // compiles one kernel per program).
  const std::string named = fmt::format("function '{}'", kernel);
  for (size_t at = log.find("Performance Loss"); at != std::string_view::npos; at = log.find("Performance Loss", at + 1)) {
    const size_t line_end = log.find('\n', at);
    const std::string_view note = log.substr(at, line_end == std::string_view::npos ? std::string_view::npos : line_end - at);
    if (note.find("function '") != std::string_view::npos && note.find(named) == std::string_view::npos) continue;
    if (note.find("'setmaxnreg' ignored") != std::string_view::npos) r.setmaxnreg_ignored = true;
    if (note.find("wgmma.mma_async instructions are serialized") != std::string_view::npos) r.wgmma_serialized = true;
  }
  return r;
}

Result<KernelResources> kernel_resources(CompileJob job, std::string_view kernel) {
  // Every cubin compile has ptxas report (nvrtc_options): the log holds the figures.
  LJ_RT_ASSIGN(CompiledProgram prog, compile(job.source, job.options, job.target));
  std::optional<KernelResources> r = parse_ptxas_info(prog.log, kernel);
  if (!r) return Error{fmt::format("{}: ptxas reported no resources for the kernel in its log:\n{}", kernel, prog.log)};
  return *r;
}

}  // namespace lj::rt

// NVRTC compilation, target choice, log mapping and the parallel compile pool (see nvrtc.h).
#include "runtime/nvrtc.h"

#include "runtime/compile_pool.h"
#include "runtime/compile_workers.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/embedded_headers.h"

namespace lj::rt {
namespace {

Status nvrtc_check(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return {};
  return Error{fmt::format("{} failed: {}", call, nvrtcGetErrorString(r))};
}

#define LJ_NVRTC(call) LJ_RT_TRY(nvrtc_check(call, #call))

/// Frees the program on every path out of compile().
class ProgramGuard {
 public:
  explicit ProgramGuard(nvrtcProgram p) : p_(p) {}
  ~ProgramGuard() { nvrtcDestroyProgram(&p_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  nvrtcProgram p_;
};

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// The __global__ function whose definition starts at or above `line` (1-based): the identifier just
/// before the first '(' after the nearest preceding `__global__` that does not open the arguments of
/// `__launch_bounds__` (every generated kernel has them). Generated kernels put their signature on
/// one or a few lines, so a short look-ahead suffices.
std::string enclosing_kernel(const std::vector<std::string_view>& lines, int line) {
  for (int i = std::min<int>(line, static_cast<int>(lines.size())) - 1; i >= 0; --i) {
    size_t g = lines[i].find("__global__");
    if (g == std::string_view::npos) continue;
    std::string sig;
    for (int j = i; j < static_cast<int>(lines.size()) && j < i + 4; ++j) {
      sig += std::string(j == i ? lines[j].substr(g) : lines[j]);
      sig += ' ';
    }
    for (size_t from = 0;;) {
      const size_t paren = sig.find('(', from);
      if (paren == std::string::npos) return "";
      size_t end = paren;
      while (end > 0 && sig[end - 1] == ' ') --end;
      size_t begin = end;
      while (begin > 0 && is_ident_char(sig[begin - 1])) --begin;
      if (sig.compare(begin, end - begin, "__launch_bounds__") != 0) return sig.substr(begin, end - begin);
      const size_t close = sig.find(')', paren);  // its arguments are numbers: no nested parentheses
      if (close == std::string::npos) return "";
      from = close + 1;
    }
  }
  return "";
}

}  // namespace

std::string Target::name() const {
  if (ptx_only) return fmt::format("compute_{}{}", sm, arch_specific ? "a" : "");
  return fmt::format("sm_{}{}", sm, arch_specific ? "a" : "");
}

Result<Target> Target::parse(std::string_view text) {
  Target t;
  std::string_view rest;
  if (text.starts_with("sm_")) {
    rest = text.substr(3);
  } else if (text.starts_with("compute_")) {
    rest = text.substr(8);
    t.ptx_only = true;
  } else {
    return Error{fmt::format("bad target `{}`: expected sm_XY, sm_XYa or compute_XY", text)};
  }
  if (rest.ends_with('a')) {
    t.arch_specific = true;
    rest.remove_suffix(1);
  }
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), t.sm);
  if (ec != std::errc() || ptr != rest.data() + rest.size() || t.sm < 10) {
    return Error{fmt::format("bad target `{}`: expected sm_XY, sm_XYa or compute_XY", text)};
  }
  return t;
}

std::vector<std::string> nvrtc_options(const CompileOptions& options, const Target& target) {
  std::vector<std::string> out;
  for (const char* o : fixed_options()) out.emplace_back(o);
  out.push_back("--gpu-architecture=" + target.name());
  // ptxas reports each kernel's registers, spills and shared memory in the log: the cache records
  // them (`layerjit cache show`) at no extra compile. The cubin is the same with or without.
  if (!target.ptx_only) out.emplace_back("--ptxas-options=-v");
  if (options.pch) out.emplace_back("-pch");
  for (const std::string& o : options.extra) out.push_back(o);
  return out;
}

std::span<const char* const> fixed_options() {
  static const char* const kOptions[] = {"-std=c++17", "-default-device", "-lineinfo"};
  return kOptions;
}

std::string nvrtc_version() {
  int major = 0;
  int minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

Result<std::vector<int>> supported_archs() {
  int n = 0;
  LJ_NVRTC(nvrtcGetNumSupportedArchs(&n));
  std::vector<int> archs(static_cast<size_t>(n));
  LJ_NVRTC(nvrtcGetSupportedArchs(archs.data()));
  std::sort(archs.begin(), archs.end());
  return archs;
}

Result<TargetChoice> choose_target(int device_cc, bool want_arch_specific, std::span<const int> supported,
                                   std::string_view nvrtc_version_text) {
  if (supported.empty()) return Error{"NVRTC reports no supported GPU architectures"};
  const int newest = *std::max_element(supported.begin(), supported.end());
  const int oldest = *std::min_element(supported.begin(), supported.end());
  TargetChoice choice;
  if (std::find(supported.begin(), supported.end(), device_cc) != supported.end()) {
    // Arch-specific (`a`) targets start with Hopper.
    choice.target = Target{device_cc, want_arch_specific && device_cc >= 90, false};
    return choice;
  }
  if (device_cc > newest) {
    // PTX is forward compatible: the driver can JIT compute_<newest> for any later GPU. Arch-specific
    // PTX is not, so the `a` features are dropped (generated code must have a generic path).
    choice.target = Target{newest, false, true};
    choice.warning = fmt::format(
        "warning: this GPU (sm_{}) is newer than NVRTC {} knows (newest sm_{}); compiling PTX for "
        "compute_{} and letting the driver JIT it{}",
        device_cc, nvrtc_version_text, newest, newest,
        want_arch_specific ? " (arch-specific instructions disabled)" : "");
    return choice;
  }
  if (device_cc < oldest) {
    return Error{fmt::format("this GPU (sm_{}) is older than NVRTC {} supports (oldest sm_{})", device_cc,
                             nvrtc_version_text, oldest)};
  }
  // Between two supported archs (e.g. sm_91 with 90 and 100 known): a cubin for the nearest older arch
  // of the same major runs on it; otherwise fall back to PTX of the nearest older arch.
  int below = oldest;
  for (int a : supported) {
    if (a < device_cc) below = std::max(below, a);
  }
  const bool same_major = below / 10 == device_cc / 10;
  choice.target = Target{below, false, !same_major};
  choice.warning = fmt::format("warning: NVRTC {} has no target for sm_{}; compiling {} instead",
                               nvrtc_version_text, device_cc, choice.target.name());
  return choice;
}

std::vector<CompileDiagnostic> parse_compile_log(std::string_view log, std::string_view source,
                                                 std::string_view program_name) {
  std::vector<CompileDiagnostic> out;
  const std::vector<std::string_view> src_lines = split_lines(source);
  for (std::string_view line : split_lines(log)) {
    // "<file>(<line>): <severity>: <message>"; NVRTC adds "#<number>-D" codes on some warnings.
    size_t open = line.find('(');
    if (open == std::string_view::npos || open == 0) continue;
    size_t close = line.find("): ", open);
    if (close == std::string_view::npos) continue;
    int lineno = 0;
    auto [ptr, ec] = std::from_chars(line.data() + open + 1, line.data() + close, lineno);
    if (ec != std::errc() || ptr != line.data() + close) continue;
    std::string_view rest = line.substr(close + 3);
    size_t colon = rest.find(": ");
    if (colon == std::string_view::npos) continue;
    CompileDiagnostic d;
    d.file = std::string(line.substr(0, open));
    d.line = lineno;
    d.severity = std::string(rest.substr(0, colon));
    d.message = std::string(rest.substr(colon + 2));
    if (d.file == program_name) d.kernel = enclosing_kernel(src_lines, lineno);
    out.push_back(std::move(d));
  }
  return out;
}

std::string map_compile_log(std::string_view log, std::string_view source, std::string_view program_name,
                            const Target& target) {
  const std::vector<CompileDiagnostic> diags = parse_compile_log(log, source, program_name);
  const std::vector<std::string_view> src_lines = split_lines(source);
  size_t errors = 0;
  for (const CompileDiagnostic& d : diags) errors += d.severity.find("error") != std::string::npos;
  // ptxas reports against PTX lines ("ptxas application ptx input, line 33; error ..."), which do not
  // map onto the source; count them so the summary is not "0 error(s)".
  std::vector<std::string_view> ptxas_errors;
  for (std::string_view l : split_lines(log)) {
    if (l.starts_with("ptxas") && l.find("error") != std::string_view::npos) ptxas_errors.push_back(l);
  }
  errors += ptxas_errors.size();
  std::string out = fmt::format("NVRTC {} failed to compile {} for {}: {} error(s)\n", nvrtc_version(),
                                program_name, target.name(), errors);
  for (const CompileDiagnostic& d : diags) {
    if (d.severity.find("error") == std::string::npos) continue;
    out += fmt::format("{}:{}: {}: {}\n", d.file, d.line, d.severity, d.message);
    if (d.file != program_name) continue;  // a header's line: its text is not the generated source
    out += fmt::format("  in kernel `{}`\n", d.kernel.empty() ? "(outside any kernel)" : d.kernel);
    const int first = std::max(1, d.line - 3);
    const int last = std::min(static_cast<int>(src_lines.size()), d.line + 3);
    for (int i = first; i <= last; ++i) {
      out += fmt::format("  {} {:>5} | {}\n", i == d.line ? ">" : " ", i, src_lines[static_cast<size_t>(i - 1)]);
    }
  }
  for (std::string_view l : ptxas_errors) out += fmt::format("{} (PTX assembly of {})\n", l, program_name);
  out += "NVRTC log:\n";
  for (std::string_view l : split_lines(log)) out += fmt::format("  {}\n", l);
  return out;
}

namespace {
std::atomic<int64_t> g_compiles{0};  // nvrtcCompileProgram calls in this process
}  // namespace

int64_t nvrtc_compile_count() { return g_compiles.load(std::memory_order_relaxed); }
void add_worker_compiles(int64_t n) { g_compiles.fetch_add(n, std::memory_order_relaxed); }

Result<CompiledProgram> compile(std::string_view source, const CompileOptions& options, const Target& target) {
  // Header lists: the embedded layerjit device headers, then the caller's.
  std::vector<const char*> header_texts;
  std::vector<const char*> header_names;
  for (const auto& [name, text] : embedded_headers()) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  for (const auto& [name, text] : options.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  const std::string src(source);
  nvrtcProgram prog = nullptr;
  LJ_NVRTC(nvrtcCreateProgram(&prog, src.c_str(), options.program_name.c_str(),
                              static_cast<int>(header_texts.size()), header_texts.data(), header_names.data()));
  ProgramGuard guard(prog);

  CompiledProgram out;
  out.target = target;
  out.options = nvrtc_options(options, target);
  std::vector<const char*> argv;
  for (const std::string& o : out.options) argv.push_back(o.c_str());

  const auto start = std::chrono::steady_clock::now();
  g_compiles.fetch_add(1, std::memory_order_relaxed);
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  LJ_NVRTC(nvrtcGetProgramLogSize(prog, &log_size));
  out.log.resize(log_size);
  LJ_NVRTC(nvrtcGetProgramLog(prog, out.log.data()));
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();

  if (r == NVRTC_ERROR_COMPILATION) return Error{map_compile_log(out.log, source, options.program_name, target)};
  LJ_RT_TRY(nvrtc_check(r, "nvrtcCompileProgram"));

  if (!target.ptx_only) {
    size_t n = 0;
    LJ_NVRTC(nvrtcGetCUBINSize(prog, &n));
    out.cubin.resize(n);
    LJ_NVRTC(nvrtcGetCUBIN(prog, out.cubin.data()));
  }
  if (target.ptx_only || options.want_ptx) {
    size_t n = 0;
    LJ_NVRTC(nvrtcGetPTXSize(prog, &n));
    out.ptx.resize(n);
    LJ_NVRTC(nvrtcGetPTX(prog, out.ptx.data()));
    // The size counts the terminating NUL; keep the string's own terminator instead.
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  return out;
}

int default_compile_workers() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 8u));
}

size_t estimated_compile_cost(const CompileJob& job) {
  auto find_header = [&](std::string_view name) -> const std::string* {
    for (const auto& [n, text] : job.options.headers)
      if (n == name) return &text;
    for (const auto& [n, text] : embedded_headers())
      if (n == name) return &text;
    return nullptr;
  };
  size_t cost = job.source.size();
  std::vector<std::string_view> seen;
  std::vector<std::string_view> pending{job.source};
  while (!pending.empty()) {
    const std::string_view text = pending.back();
    pending.pop_back();
    for (size_t at = text.find("#include"); at != std::string_view::npos; at = text.find("#include", at + 8)) {
      const size_t open = text.find('"', at);
      const size_t eol = text.find('\n', at);
      if (open == std::string_view::npos || open > eol) continue;  // <system> headers: not ours
      const size_t close = text.find('"', open + 1);
      if (close == std::string_view::npos || close > eol) continue;
      const std::string_view name = text.substr(open + 1, close - open - 1);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      if (const std::string* h = find_header(name)) {
        cost += h->size();
        pending.push_back(*h);
      }
    }
  }
  return cost;
}

namespace {

std::vector<Result<CompiledProgram>> compile_distinct(std::span<const CompileJob> jobs, int workers, const CompileDone& done) {
  WorkerSettings settings = worker_settings_from_env();
  if (workers > 0) settings.jobs = workers;
  if (!settings.path.empty() && !jobs.empty()) return compile_in_workers(jobs, settings, done);
  workers = settings.jobs > 0 ? settings.jobs : default_compile_workers();
  // Each NVRTC program is independent: a thread just compiles the next job.
  return run_compile_pool(jobs, workers, done, [] {
    return [](const CompileJob& job) { return compile(job.source, job.options, job.target); };
  });
}

}  // namespace

std::vector<Result<CompiledProgram>> compile_parallel(std::span<const CompileJob> jobs, int workers, const CompileDone& done) {
  // Identical jobs compile once: a sweep reaches one kernel from several configs or row counts (the
  // fp8 GEMV's source is the same at 16, 128 and 4096 rows, 25 s of NVRTC each on the CI machine).
  std::vector<size_t> distinct;            // the first job of each kind, in job order
  std::vector<size_t> kind(jobs.size());   // job -> its index in `distinct`
  std::unordered_map<size_t, std::vector<size_t>> by_hash;
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::vector<size_t>& same_hash = by_hash[std::hash<std::string_view>{}(jobs[i].source)];
    auto it = std::find_if(same_hash.begin(), same_hash.end(), [&](size_t k) { return jobs[distinct[k]] == jobs[i]; });
    if (it != same_hash.end()) {
      kind[i] = *it;
      continue;
    }
    kind[i] = distinct.size();
    same_hash.push_back(distinct.size());
    distinct.push_back(i);
  }
  if (distinct.size() == jobs.size()) return compile_distinct(jobs, workers, done);

  std::vector<CompileJob> once;
  once.reserve(distinct.size());
  for (size_t i : distinct) once.push_back(jobs[i]);
  std::vector<std::vector<size_t>> members(distinct.size());
  for (size_t i = 0; i < jobs.size(); ++i) members[kind[i]].push_back(i);
  CompileDone each;
  if (done)
    each = [&](size_t k, const Result<CompiledProgram>& r) {
      for (size_t i : members[k]) done(i, r);
    };
  std::vector<Result<CompiledProgram>> results = compile_distinct(once, workers, each);
  std::vector<Result<CompiledProgram>> out;
  out.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) out.push_back(results[kind[i]]);
  return out;
}

}  // namespace lj::rt

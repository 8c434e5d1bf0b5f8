#include "tools/run_inputs.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "jit/index_inputs.h"
#include "jit/compile_kernels.h"
#include "layerjit/error.h"
#include "runtime/context.h"
#include "runtime/host_values.h"
#include "runtime/nvrtc.h"
#include "tools/cli.h"

namespace lj::cli {

uint64_t parse_seed(const std::string& v) {
  uint64_t seed = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
  if (ec != std::errc() || p != v.data() + v.size()) throw UsageError{"--seed expects a non-negative integer, got '" + v + "'"};
  return seed;
}

void require_symbols(const Graph& g, const Bindings& b) {
  for (const std::string& s : g.symbols())
    if (!b.get(s)) throw UsageError{fmt::format("@{} has the symbol {}: give its value with --bind {}=...", g.name(), s, s)};
}

rt::Context& gpu_context() {
  auto ctx = rt::Context::get(0);
  if (!ctx.ok()) throw UserError(ctx.message());
  return **ctx;
}

Plans build_plans(rt::Context& ctx, const Graph& g, const Bindings& b, bool arch_specific, const FusionOptions& fusion,
                  std::shared_ptr<const jit::Bundle> bundle, bool quiet) {
  exec::BuildOptions fused_opts, unfused_opts;
  fused_opts.fusion = fusion;
  fused_opts.bundle = std::move(bundle);
  if (!quiet) {
    auto progress = [](const char* plan) {
      return [plan](const jit::CompileProgress& p) {
        if (!p.cache_hit) std::fprintf(stderr, "  %s [%zu/%zu] %s %s (%.2f s)\n", plan, p.done, p.total, p.name.c_str(), p.ok ? "compiled" : "FAILED", p.seconds);
      };
    };
    fused_opts.progress = progress("fused");
    unfused_opts.progress = progress("unfused");
  }
  const int64_t nvrtc_before = rt::nvrtc_compile_count();
  fused_opts.hint = unfused_opts.hint = b;
  fused_opts.arch_specific = unfused_opts.arch_specific = arch_specific;
  unfused_opts.fusion.fuse = false;
  auto t0 = std::chrono::steady_clock::now();
  exec::Executable fused = must(exec::Executable::build(ctx, g, fused_opts), "build the fused plan");
  auto t1 = std::chrono::steady_clock::now();
  exec::Executable unfused = must(exec::Executable::build(ctx, g, unfused_opts), "build the unfused plan");
  auto t2 = std::chrono::steady_clock::now();
  return Plans{std::move(fused), std::move(unfused), std::chrono::duration<double>(t1 - t0).count(),
               std::chrono::duration<double>(t2 - t1).count(), rt::nvrtc_compile_count() - nvrtc_before};
}

std::map<std::string, HostTensor> seeded_host_inputs(const Graph& g, const Bindings& b, uint64_t seed, const exec::SafetensorsFile* weights) {
  std::map<std::string, HostTensor> out;
  std::map<ValueId, const exec::SafeTensor*> from_file;
  if (weights)
    for (const exec::WeightMatch& w : exec::match_weights(g, *weights)) from_file[w.param] = w.tensor;
  uint64_t k = 0;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    const std::vector<int64_t> shape = resolve(info.type.shape, b);
    HostTensor host(info.type.dtype, shape);
    if (auto f = from_file.find(v); f != from_file.end()) {
      host = weights->read(*f->second);
      ++k;  // the other inputs get the values they get without a file
    } else if (info.type.dtype == DType::I32) {
      host = jit::index_input(g, v, b, seed * 1000 + ++k, jit::IndexFill::Last);
    } else if (is_packed(info.type.dtype)) {
      fill_codes(host, seed * 1000 + ++k);
    } else {
      const bool weight = info.is_param && info.type.rank() >= 2;
      const double lo = weight ? -1.0 / std::sqrt(static_cast<double>(shape.back())) : info.is_param ? 0.5 : -1.0;
      const double hi = weight ? -lo : info.is_param ? 1.5 : 1.0;
      fill_uniform(host, seed * 1000 + ++k, lo, hi);
    }
    out.emplace(info.name, std::move(host));
  }
  return out;
}

std::vector<unsigned char> encoded(const HostTensor& t, std::string_view name) {
  std::vector<unsigned char> enc(static_cast<size_t>(tensor_bytes(t.dtype, t.shape)));
  if (rt::encode_tensor(t, enc.data()))
    throw InternalError(fmt::format("input %{}: a generated value does not fit {}", name, dtype_name(t.dtype)));
  return enc;
}

SeededInputs make_inputs(rt::Context& ctx, rt::Stream& stream, const Graph& g, const Bindings& b, uint64_t seed,
                         const exec::SafetensorsFile* weights) {
  SeededInputs in;
  in.host = seeded_host_inputs(g, b, seed, weights);
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    const std::vector<unsigned char> enc = encoded(in.host.at(info.name), info.name);
    DeviceTensor d{must(rt::DeviceBuffer::allocate(ctx, std::max<size_t>(enc.size(), 1)), "allocate an input"), enc.size()};
    if (!enc.empty()) must(rt::copy_to_device(stream, d.buf.ptr(), enc.data(), enc.size()), "upload an input");
    in.device.emplace(v, std::move(d));
  }
  return in;
}

void bind_inputs(rt::Context& ctx, rt::Stream& stream, exec::Executable& e, SeededInputs& in) {
  const std::vector<ValueId> written = e.written_inputs();
  for (auto& [v, d] : in.device) {
    CUdeviceptr p = d.buf.ptr();
    if (std::find(written.begin(), written.end(), v) != written.end()) {
      in.copies.push_back({must(rt::DeviceBuffer::allocate(ctx, std::max<size_t>(d.bytes, 1)), "allocate a cache copy"), d.bytes});
      must(rt::copy_on_device(stream, in.copies.back().buf.ptr(), d.buf.ptr(), d.bytes), "copy a cache");
      p = in.copies.back().buf.ptr();
    }
    must(e.bind(v, p), "bind an input");
  }
}

}  // namespace lj::cli

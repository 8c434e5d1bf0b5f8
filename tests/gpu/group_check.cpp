// The GPU tier's differential check of one fusion group: random inputs (never zeros) uploaded in
// their exact device encoding, outputs poisoned, the generated kernel launched, and every written
// buffer compared with the CPU reference of the group's nodes.
#include "tests/gpu/group_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <fmt/format.h>

#include "compiler/fusion/tensor_layout.h"
#include "compiler/fusion/legality.h"
#include "jit/index_inputs.h"
#include "jit/compile_kernels.h"
#include "jit/target.h"
#include "layerjit/op_attrs.h"
#include "runtime/fill.h"
#include "runtime/host_values.h"
#include "runtime/kernel_args.h"
#include "runtime/memory.h"

using namespace lj;

namespace lj_test {

namespace {

// Tolerance per dtype: one rounding step of the format (the kernel computes in fp32, the reference in
// fp64, so a value near a rounding boundary may land one step apart), plus a small absolute floor.
bool close(DType t, double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  double rel = 1e-5, abs_tol = 1e-6;
  switch (t) {
    case DType::F32: break;
    case DType::BF16: rel = 1.0 / 64; abs_tol = 1.0 / 1024; break;
    case DType::F16: rel = 1.0 / 512; abs_tol = 1.0 / 8192; break;
    case DType::F8E4M3: rel = 1.0 / 8; abs_tol = 1.0 / 512; break;
    case DType::F8E5M2: rel = 1.0 / 4; abs_tol = 1.0 / 8192; break;
    case DType::I8:
    case DType::I32:
    case DType::U4:
    case DType::I4: rel = 0; abs_tol = 1; break;
  }
  return std::fabs(got - want) <= abs_tol + rel * std::fabs(want);
}

// Tolerance of a matmul output: the dtype's relative step (bf16: 2^-6, as close()) plus an absolute
// term scaled with sqrt(K). With inputs uniform in [-1, 1) a dot product of length K has typical
// magnitude sqrt(K / 9), and the kernel's fp32 sum differs from the fp64 reference by accumulation-
// order error proportional to that scale, so a result that cancels to near zero can be off by a
// rounding step of the output format at the scale of the partial sums, not of the result. The unit
// is one rounding step of the output format (bf16 2^-8, f16 2^-11, fp8 2^-4 / 2^-3) and for f32
// outputs the fp32 accumulation step 2^-24 with a margin of 2^6 for the order of K additions.
// Attention outputs are weighted means of v rows: the kernel rounds the softmax weights P to q's
// dtype before P V (as every tensor-core flash kernel does), an error of at most half a unit in the
// last place of each weight, so at most 2^-9 (bf16) or 2^-12 (f16) of max |v| = 1 in the mean. Twice
// that, plus the output's own rounding.
// The f32 output is the log-sum-exp of each row (-inf where the row sees no key): fp32 scores, the
// hardware's approximate 2^x (about 2^-22 relative) and an fp32 sum over up to a thousand keys, each
// adding rounding of 2^-24 relative; 2^-12 absolute (about a thousand such steps of a sum near 1) and
// 2^-16 of the value bound it with a margin.
bool attention_close(DType t, double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (std::isinf(want)) return got == want;
  switch (t) {
    case DType::F32: return std::fabs(got - want) <= std::ldexp(1.0, -12) + std::fabs(want) * std::ldexp(1.0, -16);
    case DType::BF16: return std::fabs(got - want) <= std::ldexp(1.0, -8) + std::fabs(want) / 128;
    case DType::F16: return std::fabs(got - want) <= std::ldexp(1.0, -11) + std::fabs(want) / 1024;
    default: FAIL("attention kernels produce bf16 or f16"); return false;
  }
}

// `widen` scales the bound for values computed from two products (a RoPE epilogue's a c -/+ b s: each
// of a and b may be a rounding step apart, and the result may cancel). `fp8_products`: the operands
// are fp8, which Hopper's wgmma adds into its accumulator keeping about 14 bits, not fp32's 24
// (DeepSeek-V3's report, measured on H800; cuBLAS calls staying there "fast accumulation"): each of
// the K/32 k32 steps may drop up to 2^-13 of a partial sum bounded by about sqrt(K), always towards
// zero, so the errors add up. An f32 output gets that bound, (K/32) 2^-13 sqrt(K) (K = 4096: 1.0;
// the H200 showed up to 0.205 on sums up to 46); a bf16 output's own rounding hides it up to K of
// about a thousand.
bool matmul_close(DType t, int64_t k, double got, double want, double widen = 1, bool fp8_products = false) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  double rel = 1e-5, unit = std::ldexp(1.0, -18);
  switch (t) {
    case DType::F32:
      if (fp8_products) rel = std::ldexp(1.0, -12), unit = static_cast<double>(k) / 32 * std::ldexp(1.0, -13);
      break;
    case DType::BF16: rel = 1.0 / 64; unit = std::ldexp(1.0, -8); break;
    case DType::F16: rel = 1.0 / 512; unit = std::ldexp(1.0, -11); break;
    case DType::F8E4M3: rel = 1.0 / 8; unit = std::ldexp(1.0, -4); break;
    case DType::F8E5M2: rel = 1.0 / 4; unit = std::ldexp(1.0, -3); break;
    case DType::I8:
    case DType::I32:
    case DType::U4:
    case DType::I4: FAIL("matmul outputs are floating point"); break;
  }
  return std::fabs(got - want) <= widen * (std::sqrt(static_cast<double>(k)) * unit + rel * std::fabs(want));
}

// The less precise of two floating-point dtypes (fewer mantissa bits).
DType coarser(DType a, DType b) {
  auto bits = [](DType t) {
    switch (t) {
      case DType::F32: return 24;
      case DType::F16: return 11;
      case DType::BF16: return 8;
      case DType::F8E4M3: return 4;
      case DType::F8E5M2: return 3;
      default: return 24;
    }
  };
  return bits(a) <= bits(b) ? a : b;
}

// The reduction length of a matmul group (0 for other kinds): selects matmul_close for its output.
int64_t matmul_k(const Graph& g, const FusionGroup& grp) {
  if (grp.kind != GroupKind::Matmul) return 0;
  return g.value(g.node(anchor_node(g, grp)).operands[1]).type.shape[1].value();
}

}  // namespace

// Random data for a value no group node produces: positions inside the caches, positive scales,
// values in [-1, 1) otherwise (exactly representable in the dtype).
HostTensor random_input(const Graph& g, ValueId v, const Bindings& b, uint64_t seed) {
  const ValueInfo& info = g.value(v);
  HostTensor t(info.type.dtype, resolve(info.type.shape, b));
  bool is_scale = false;
  for (const Node& n : g.nodes())
    if ((n.kind == OpKind::Quantize || n.kind == OpKind::Dequantize) && n.operands.size() > 1 && n.operands[1] == v)
      is_scale = true;
  if (info.type.dtype == DType::I32) {
    return jit::index_input(g, v, b, seed, jit::IndexFill::Random);
  } else if (is_packed(info.type.dtype)) {
    fill_codes(t, seed);
  } else if (is_scale) {
    fill_uniform(t, seed, 0.05, 0.5);
  } else {
    fill_uniform(t, seed, -1.0, 1.0);
  }
  return t;
}

namespace {

// The reference value of `v`: from `known`, or by evaluating its producer (recursively).
const HostTensor& evaluate(const Graph& g, ValueId v, const Bindings& b, std::map<ValueId, HostTensor>& known) {
  if (auto it = known.find(v); it != known.end()) return it->second;
  const Node& n = g.node(g.value(v).producer);
  std::vector<const HostTensor*> ops;
  for (ValueId o : n.operands) ops.push_back(&evaluate(g, o, b, known));
  std::vector<TensorType> types;
  for (ValueId r : n.results) types.push_back(g.value(r).type);
  auto res = reference_op(n.kind, ops, n.attrs, types, b);
  for (size_t i = 0; i < n.results.size(); ++i) known[n.results[i]] = std::move(res[i]);
  return known.at(v);
}

// The weight prologue whose weights the kernel never rounds: the 4-bit GEMV with groups of 128 or
// more (templates/layerjit/gemv_q4.cuh) multiplies the integers q - z by x and scales each k step's
// f32 sums, so it computes the matmul over the exact (q - z) s, not over the dequantize's 16-bit
// result as the reference does. (The GEMMs round each weight to 16 bits in shared memory, as the
// reference does: gemm_q4.cuh.) Its dequantize node, or -1.
NodeId unrounded_dequantize(const Graph& g, const FusionGroup& grp, const GeneratedKernel& k) {
  if (grp.kind != GroupKind::Matmul || grp.matmul.dequant < 0 || k.config.rfind("gemv", 0) != 0) return -1;
  return attr::group(g.node(grp.matmul.dequant).attrs).value_or(0) % 128 == 0 ? grp.matmul.dequant : -1;
}

}  // namespace

std::map<ValueId, HostTensor> check_group(rt::Context& ctx, rt::Stream& stream, const GroupCase& c, const FusionGroup& grp) {
  const Graph& g = *c.graph;
  const std::vector<TensorLayout> layouts = compute_layouts(g, grp.dense_views);
  GeneratedKernel k = emit_group(g, grp, c.emit);
  INFO(g.name() << " group " << grp.id << " (" << group_kind_name(grp.kind) << ")\n" << k.source);

  // Reference: random buffers behind every input, views evaluated from them, then the group's nodes.
  std::map<ValueId, HostTensor> known;
  uint64_t seed = c.seed * 1000 + static_cast<uint64_t>(grp.id);
  for (ValueId v : grp.inputs) {
    const ValueId buf = layouts[static_cast<size_t>(v)].buffer;
    if (!known.count(buf)) known[buf] = c.input ? c.input(g, buf, c.bind, ++seed) : random_input(g, buf, c.bind, ++seed);
    // A cache write's result is its cache buffer, updated in place by an earlier group: the group
    // reads whatever that buffer holds.
    const NodeId maker = g.value(v).producer;
    if (v != buf && maker >= 0 && g.node(maker).kind == OpKind::KvCacheWrite) known[v] = known[buf];
  }
  std::map<ValueId, HostTensor> before = known;  // buffers as uploaded
  // Such a group is checked against the matmul over the exact weights: (q - z) s in f32 (exact for a
  // 16-bit scale: q - z has at most 9 bits), then the matmul and its epilogue as usual.
  if (const NodeId d = unrounded_dequantize(g, grp, k); d >= 0) {
    const Node& dn = g.node(d);
    std::vector<const HostTensor*> ops;
    for (ValueId o : dn.operands) ops.push_back(&evaluate(g, o, c.bind, known));
    TensorType exact = g.value(dn.results[0]).type;
    exact.dtype = DType::F32;
    Attrs attrs = dn.attrs;
    attrs.set("dtype", DType::F32);
    HostTensor w = std::move(reference_op(dn.kind, ops, attrs, {exact}, c.bind).at(0));
    // Labelled with the node's type again (the matmul's operands share a dtype), the values left
    // unrounded: the reference matmul sums them in fp64 as they are.
    w.dtype = g.value(dn.results[0]).type.dtype;
    known[dn.results[0]] = std::move(w);
  }
  // The rms_norm folded into a 4-bit GEMV (one row: FusionGroup::matmul.x_norm without a quantize)
  // rounds x g to 16 bits and scales the sums by the row's factor, where the norm's reference rounds
  // x r g: one rounding of each element of the normed row apart, which 4-bit weights (up to 15 times
  // their scale) carry past the sums' tolerance (a CPU model of the two at K = 1344 put 5 of 580 sums
  // outside it). Such a group is checked against its kernel's definition: the normed row as
  // round(x g) times r (r in fp64, the values left unrounded), then the matmul as usual.
  if (grp.kind == GroupKind::Matmul && grp.matmul.x_norm >= 0 && grp.matmul.x_quantize < 0) {
    const Node& nn = g.node(grp.matmul.x_norm);
    const HostTensor x = evaluate(g, nn.operands[0], c.bind, known), w = evaluate(g, nn.operands[1], c.bind, known);
    const TensorType& ht = g.value(nn.results[0]).type;
    HostTensor xg(ht.dtype, x.shape);
    const size_t len = w.data.size(), rows = x.data.size() / len;
    for (size_t i = 0; i < x.data.size(); ++i) xg.data[i] = x.data[i] * w.data[i % len];
    xg.round_to_dtype();
    for (size_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (size_t j = 0; j < len; ++j) ss += x.data[r * len + j] * x.data[r * len + j];
      const double factor = 1 / std::sqrt(ss / static_cast<double>(len) + attr::eps(nn.attrs));
      for (size_t j = 0; j < len; ++j) xg.data[r * len + j] *= factor;
    }
    known[nn.results[0]] = std::move(xg);
  }
  for (NodeId n : grp.nodes)
    for (ValueId r : g.node(n).results) evaluate(g, r, c.bind, known);
  for (ValueId o : grp.outputs) evaluate(g, o, c.bind, known);  // dense views the group stores
  // A copied returned view holds the view's elements, read out of the buffers uploaded above.
  for (ValueId v : grp.copies) evaluate(g, v, c.bind, known);

  // Many cases share a kernel (M is a run-time value): compile each source once per process. The
  // map is never freed, like the context the modules belong to.
  static auto* modules = new std::map<std::string, rt::Module>();
  auto it = modules->find(k.source);
  if (it == modules->end()) {
    auto target = jit::JitTarget::of_device(ctx);  // compile_job picks sm_XYa for a kernel that needs it
    REQUIRE(target.ok());
    auto compiled = jit::compile_kernels(std::span(&k, 1), target->target, {});
    INFO((compiled[0].ok() ? std::string() : compiled[0].message()));
    REQUIRE(compiled[0].ok());
    auto mod = rt::Module::load(ctx, compiled[0]->program.image());
    INFO((mod.ok() ? std::string() : mod.message()));
    REQUIRE(mod.ok());
    it = modules->emplace(k.source, std::move(*mod)).first;
  }
  rt::Kernel kern = lj_test::kernel(it->second, k.name.c_str());

  // One allocation per buffer the kernel names (a tensor map reads the same memory as the buffer
  // parameter of its value): the inputs as uploaded, everything else poisoned.
  std::map<ValueId, rt::DeviceBuffer> buffers;
  std::vector<rt::DeviceBuffer> scratch;
  rt::ArgSources src;
  src.buffer = [&](ValueId v) -> rt::Result<CUdeviceptr> {
    if (auto found = buffers.find(v); found != buffers.end()) return found->second.ptr();
    const TensorType& t = g.value(v).type;
    const size_t bytes = static_cast<size_t>(tensor_bytes(t.dtype, resolve(t.shape, c.bind)));
    LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, bytes));
    if (before.count(v)) {
      LJ_RT_TRY(rt::upload_tensor(stream, buf.ptr(), before.at(v)));
    } else {
      // A packed 4-bit value is never written by a kernel (only dequantize reads it): poisoned bytewise.
      LJ_RT_TRY(rt::fill_poison(stream, buf.ptr(), bytes, is_packed(t.dtype) ? 1 : static_cast<size_t>(dtype_bytes(t.dtype))));
    }
    return buffers.emplace(v, std::move(buf)).first->second.ptr();
  };
  src.scratch = [&](size_t bytes) -> rt::Result<CUdeviceptr> {  // zeroed once, as the contract says
    LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, bytes));
    LJ_RT_TRY(rt::fill_zero(stream, buf.ptr(), bytes));
    scratch.push_back(std::move(buf));
    return scratch.back().ptr();
  };
  auto packed = rt::pack_kernel_args(ctx, k, c.bind, src);
  LJ_REQUIRE_OK(packed);
  rt::KernelArgs args = std::move(*packed);
  const auto blocks = static_cast<unsigned>(k.launch.blocks(c.bind));
  // A kernel with scratch runs twice on the same scratch: the second run only gives the right answer
  // if the first left the scratch as the contract says (the split-KV completion counters at zero).
  const bool has_scratch = scratch_bytes(k, c.bind) > 0;
  for (int run = 0; run < (has_scratch ? 2 : 1); ++run) {
    LJ_REQUIRE_OK(rt::launch(stream, kern,
                             rt::LaunchConfig::linear(blocks, static_cast<unsigned>(k.launch.threads),
                                                      static_cast<unsigned>(k.launch.shared_bytes)),
                             args));
  }
  LJ_REQUIRE_OK(stream.synchronize());

  // Every written buffer must equal the reference of the value stored in it.
  std::map<ValueId, HostTensor> from_gpu;  // what the kernel stored, decoded
  for (const KernelParam& p : k.params) {
    if (p.kind != KernelParam::Kind::Buffer || !p.written) continue;
    const rt::DeviceBuffer& buf = buffers.at(p.buffer);
    ValueId holder = -1;  // the group output whose buffer this is (a cache write aliases its input)
    for (ValueId o : grp.outputs)
      if (layouts[static_cast<size_t>(o)].buffer == p.buffer) holder = o;
    // A copy of a returned view is stored in a dense buffer of its own, the view's value (plan_layouts).
    const bool copy = std::find(grp.copies.begin(), grp.copies.end(), p.buffer) != grp.copies.end();
    if (copy) holder = p.buffer;
    REQUIRE(holder >= 0);
    std::vector<unsigned char> got(buf.bytes());
    LJ_REQUIRE_OK(rt::copy_to_host(stream, got.data(), buf.ptr(), got.size()));
    LJ_REQUIRE_OK(stream.synchronize());
    HostTensor& stored = from_gpu[holder];
    stored = known.at(holder);
    for (size_t i = 0; i < stored.data.size(); ++i)
      stored.data[i] = rt::decode_element(stored.dtype, got.data() + i * static_cast<size_t>(dtype_bytes(stored.dtype)));
    // A dynamic quantize's codes and scale follow from the row it read. When the kernel stored that
    // row too, they must equal, bit for bit, the reference quantize of the stored row: the norm
    // before it may round a value one step apart from the fp64 reference (checked with the row's
    // tolerance), but the amax, the scale and the codes are exact f32 arithmetic. Otherwise the
    // scale inherits the tolerance of the row's dtype (one rounding step of the amax).
    const Node& maker = g.node(g.value(holder).producer);
    const bool dynamic_quant = is_dynamic_quantize(maker);
    bool exact = c.exact || copy;  // a copy moves bits
    DType tolerance = known.at(holder).dtype;
    std::vector<HostTensor> requantized;
    if (dynamic_quant && from_gpu.count(maker.operands[0])) {
      std::vector<TensorType> types;
      for (ValueId r : maker.results) types.push_back(g.value(r).type);
      requantized = reference_op(maker.kind, {&from_gpu.at(maker.operands[0])}, maker.attrs, types, c.bind);
      exact = true;
    } else if (dynamic_quant && holder == maker.results[1]) {
      tolerance = g.value(maker.operands[0]).type.dtype;
    }
    const HostTensor& want =
        requantized.empty() ? known.at(holder) : requantized[static_cast<size_t>(g.value(holder).result_index)];
    const int64_t reduction_k = matmul_k(g, grp);
    // An epilogue that widens the product (a bf16 matmul cast to f32) keeps the product's rounding:
    // a different summation order may round a bf16 gate one step apart from the reference.
    const DType matmul_dtype = reduction_k > 0 ? coarser(want.dtype, g.value(g.node(anchor_node(g, grp)).results[0]).type.dtype) : want.dtype;
    const bool fp8_products = reduction_k > 0 && is_fp8(g.value(g.node(anchor_node(g, grp)).operands[0]).type.dtype);
    // A rotated value (a rope's result, or the cache entry written from it) combines two products.
    ValueId made = holder;
    if (maker.kind == OpKind::KvCacheWrite) made = maker.operands[1];
    const NodeId made_by = g.value(made).producer;
    const double widen = made_by >= 0 && g.node(made_by).kind == OpKind::Rope ? 2 : 1;
    size_t bad = 0, first = 0;
    double worst = 0;
    const int eb = dtype_bytes(want.dtype);
    for (size_t i = 0; i < want.data.size(); ++i) {
      const double gv = rt::decode_element(want.dtype, got.data() + i * static_cast<size_t>(eb));
      const bool ok = exact                              ? (gv == want.data[i] || (std::isnan(gv) && std::isnan(want.data[i])))
                      : reduction_k > 0                   ? matmul_close(matmul_dtype, reduction_k, gv, want.data[i], widen, fp8_products)
                      : grp.kind == GroupKind::Attention ? attention_close(want.dtype, gv, want.data[i])
                                                          : close(tolerance, gv, want.data[i]);
      if (!ok) {
        if (bad++ == 0) first = i;
      }
      if (!std::isnan(gv)) worst = std::max(worst, std::fabs(gv - want.data[i]));
    }
    // LAYERJIT_TEST_ERRORS=1 prints every output's largest error (how tolerances were calibrated).
    if (const char* e = std::getenv("LAYERJIT_TEST_ERRORS"); e && *e == '1')
      fmt::print("errors: @{} group {} %{} ({}, K = {}): max |error| {:.3g}, bad {} of {}\n", g.name(), grp.id, g.value(holder).name,
                 dtype_name(want.dtype), reduction_k, worst, bad, want.data.size());
    INFO("output %" << g.value(holder).name << " " << want.data.size() << " elements, max |error| " << worst
                    << ", first bad element " << first << ": got "
                    << rt::decode_element(want.dtype, got.data() + first * static_cast<size_t>(eb)) << " want " << want.data[first]);
    CHECK(bad == 0);
  }
  return from_gpu;
}

}  // namespace lj_test

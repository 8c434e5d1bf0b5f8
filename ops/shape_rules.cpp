// Type and shape inference of every op: checks operand dtypes and shapes and returns result types.
// Symbols propagate: [T, 4096] @ [6144, 4096]^T -> [T, 6144]. Every failure names the op, the
// operand and both shapes where two disagree.
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layerjit/error.h"
#include "ops/op_schema.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"
#include "ops/rope_frequencies.h"

namespace lj {

namespace {

[[noreturn]] void fail(std::string msg) { throw UserError(std::move(msg)); }

// An integer list as the text format spells it: [1, 0, 2].
std::string list_text(const std::vector<int64_t>& xs) { return fmt::format("[{}]", fmt::join(xs, ", ")); }

std::string_view nm(OpKind k) { return op_name(k); }
std::string opnd(OpKind k, int i) { return operand_name(k, i); }

void need_float(OpKind k, const std::vector<TensorType>& ops, int i) {
  const TensorType& t = ops[static_cast<size_t>(i)];
  if (!is_float(t.dtype))
    fail(fmt::format("{}: {} must have a floating-point dtype, got {}", nm(k), opnd(k, i), t.str()));
}

void need_dtype(OpKind k, const std::vector<TensorType>& ops, int i, DType want) {
  const TensorType& t = ops[static_cast<size_t>(i)];
  if (t.dtype != want)
    fail(fmt::format("{}: dtype mismatch: {} must be {}, got {}", nm(k), opnd(k, i), dtype_name(want), t.str()));
}

void need_same_dtype(OpKind k, const std::vector<TensorType>& ops, int i, int j) {
  const TensorType& a = ops[static_cast<size_t>(i)];
  const TensorType& b = ops[static_cast<size_t>(j)];
  if (a.dtype != b.dtype)
    fail(fmt::format("{}: dtype mismatch: {} is {} but {} is {}", nm(k), opnd(k, i), a.str(), opnd(k, j), b.str()));
}

void need_rank(OpKind k, const std::vector<TensorType>& ops, int i, int lo, int hi) {
  const TensorType& t = ops[static_cast<size_t>(i)];
  if (t.rank() < lo || t.rank() > hi) {
    std::string want = lo == hi ? fmt::format("rank {}", lo) : hi > 64 ? fmt::format("rank >= {}", lo)
                                                                      : fmt::format("rank {} to {}", lo, hi);
    fail(fmt::format("{}: {} must have {}, got {}", nm(k), opnd(k, i), want, t.str()));
  }
}

[[noreturn]] void shape_mismatch(OpKind k, const std::vector<TensorType>& ops, int i, int j, std::string why) {
  fail(fmt::format("{}: shape mismatch: {} is {} but {} is {} ({})", nm(k), opnd(k, i), ops[static_cast<size_t>(i)].str(),
                   opnd(k, j), ops[static_cast<size_t>(j)].str(), why));
}

int norm_axis(OpKind k, int64_t axis, int rank, std::string_view what = "axis") {
  if (axis < -rank || axis >= rank)
    fail(fmt::format("{}: {} {} is out of range for rank {}", nm(k), what, axis, rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

const Dim& last(const TensorType& t) { return t.shape.back(); }

TensorType infer_broadcast(OpKind k, const std::vector<TensorType>& ops) {
  need_same_dtype(k, ops, 0, 1);
  const Shape& a = ops[0].shape;
  const Shape& b = ops[1].shape;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!da) out[i] = *db;
    else if (!db) out[i] = *da;
    else if (*da == *db) out[i] = *da;
    else if (da->is_const() && da->value() == 1) out[i] = *db;
    else if (db->is_const() && db->value() == 1) out[i] = *da;
    else shape_mismatch(k, ops, 0, 1, fmt::format("dimensions {} and {} do not broadcast", da->str(), db->str()));
  }
  return {ops[0].dtype, out};
}

std::vector<TensorType> infer_matmul(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  need_rank(k, ops, 0, 1, 1 << 20);
  need_rank(k, ops, 1, 2, 2);
  if (ops[0].dtype != DType::I8) need_float(k, ops, 0);  // i8 x i8: exact integer sums (W8A8)
  need_same_dtype(k, ops, 0, 1);
  const Dim& kx = last(ops[0]);
  const Dim& kw = ops[1].shape[1];
  if (!(kx == kw)) shape_mismatch(k, ops, 0, 1, fmt::format("inner dimensions {} and {} differ", kx.str(), kw.str()));
  Shape out = ops[0].shape;
  out.back() = ops[1].shape[0];
  if (ops.size() == 3) {  // row_scale: one f32 factor per row of x, applied to the fp32 sums
    need_dtype(k, ops, 2, DType::F32);
    const Shape rows(ops[0].shape.begin(), ops[0].shape.end() - 1);
    if (!(ops[2].shape == rows))
      shape_mismatch(k, ops, 0, 2, "the row scale must have one element per row of x (x's shape without its last dimension)");
  }
  DType dt = ops[0].dtype;
  if (const std::optional<DType> od = attr::out_dtype(attrs)) dt = *od;
  else if (is_fp8(dt)) dt = DType::BF16;
  else if (dt == DType::I8) dt = DType::F32;
  if (!is_float(dt)) fail(fmt::format("{}: out_dtype must be a floating-point dtype, got {}", nm(k), dtype_name(dt)));
  return {{dt, out}};
}

std::vector<TensorType> infer_norm(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  need_rank(k, ops, 0, 1, 1 << 20);
  need_float(k, ops, 0);
  for (int i = 1; i < static_cast<int>(ops.size()); ++i) {
    need_rank(k, ops, i, 1, 1);
    need_same_dtype(k, ops, 0, i);
    if (!(ops[static_cast<size_t>(i)].shape[0] == last(ops[0])))
      shape_mismatch(k, ops, 0, i, "the weight must match the last dimension of x");
  }
  if (attr::eps(attrs) <= 0) fail(fmt::format("{}: eps must be positive, got {}", nm(k), attr::eps(attrs)));
  return {ops[0]};
}

std::vector<TensorType> infer_rope_table(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  need_rank(k, ops, 0, 1, 1);
  need_dtype(k, ops, 0, DType::I32);
  int64_t dim = attr::rope_dim(attrs);
  if (dim <= 0 || dim % 2 != 0) fail(fmt::format("{}: dim must be positive and even, got {}", nm(k), dim));
  if (attr::rope_theta(attrs) <= 1.0) fail(fmt::format("{}: theta must be greater than 1, got {}", nm(k), attr::rope_theta(attrs)));
  // Each scaling takes its own parameters, all of them and no others.
  const std::string scaling = attrs.has("scaling") ? attrs.get_string("scaling") : "";
  for (const char* p : {"factor", "low_freq_factor", "high_freq_factor", "original_max_pos"}) {
    const bool wanted = scaling == "llama3" || (scaling == "linear" && std::string_view(p) == "factor");
    if (wanted && !attrs.has(p))
      fail(fmt::format("{}: scaling = \"{}\" needs attribute '{}'", nm(k), scaling, p));
    if (!wanted && attrs.has(p))
      fail(scaling.empty() ? fmt::format("{}: attribute '{}' is given without a scaling (scaling = \"linear\" or \"llama3\")", nm(k), p)
                           : fmt::format("{}: scaling = \"{}\" takes no attribute '{}'", nm(k), scaling, p));
  }
  if (std::string why = rope_scaling_problem(attr::rope_scaling(attrs)); !why.empty()) fail(fmt::format("{}: {}", nm(k), why));
  TensorType t{DType::F32, {ops[0].shape[0], Dim(dim / 2)}};
  return {t, t};
}

std::vector<TensorType> infer_rope(OpKind k, const std::vector<TensorType>& ops) {
  need_rank(k, ops, 0, 2, 1 << 20);
  need_float(k, ops, 0);
  need_float(k, ops, 1);
  need_same_dtype(k, ops, 1, 2);
  const TensorType& x = ops[0];
  const Dim& d = last(x);
  if (!d.is_const() || d.value() % 2 != 0)
    fail(fmt::format("{}: head dimension of x must be an even constant, got {}", nm(k), x.str()));
  for (int i = 1; i <= 2; ++i) {
    const TensorType& t = ops[static_cast<size_t>(i)];
    if (t.rank() != x.rank() - 1)
      shape_mismatch(k, ops, 0, i, fmt::format("{} must have rank {}: x's leading dimensions, then head_dim/2", opnd(k, i), x.rank() - 1));
    for (int j = 0; j + 2 < x.rank(); ++j)
      if (!(t.shape[static_cast<size_t>(j)] == x.shape[static_cast<size_t>(j)]))
        shape_mismatch(k, ops, 0, i, fmt::format("leading dimension {} differs", j));
    if (!(last(t) == Dim(d.value() / 2)))
      shape_mismatch(k, ops, 0, i, fmt::format("last dimension must be head_dim/2 = {}", d.value() / 2));
  }
  return {x};
}

std::vector<TensorType> infer_attention(OpKind k, const std::vector<TensorType>& ops) {
  const TensorType& q = ops[0];
  need_rank(k, ops, 0, 3, 4);
  need_float(k, ops, 0);
  need_same_dtype(k, ops, 0, 1);
  need_same_dtype(k, ops, 0, 2);
  const int r = q.rank();
  for (int i = 1; i <= 2; ++i) {
    if (ops[static_cast<size_t>(i)].rank() != r)
      shape_mismatch(k, ops, 0, i, fmt::format("q and {} must have the same rank ([T, H, D] or [B, T, H, D])", opnd(k, i)));
  }
  const TensorType& kk = ops[1];
  const TensorType& v = ops[2];
  if (!(kk.shape == v.shape)) shape_mismatch(k, ops, 1, 2, "k and v must have the same shape");
  auto at = [&](const TensorType& t, int i) -> const Dim& { return t.shape[static_cast<size_t>(r + i)]; };
  const Dim& hq = at(q, -2);
  const Dim& hkv = at(kk, -2);
  const Dim& dq = at(q, -1);
  const Dim& dk = at(kk, -1);
  for (const Dim* d : {&hq, &hkv, &dq})
    if (!d->is_const())
      fail(fmt::format("{}: head counts and head_dim must be constants, got q {} and k {}", nm(k), q.str(), kk.str()));
  if (!(dq == dk)) shape_mismatch(k, ops, 0, 1, fmt::format("head_dim {} and {} differ", dq.str(), dk.str()));
  if (hq.value() % hkv.value() != 0)
    fail(fmt::format("{}: query heads ({}) are not a multiple of key/value heads ({}): q is {}, k is {}", nm(k), hq.value(),
                     hkv.value(), q.str(), kk.str()));
  const bool paged = ops.size() == 5;
  if (paged) {
    // k and v are page pools [P, page, Hkv, D]; block_table[b, i] is the pool page holding keys
    // i * page .. (i + 1) * page - 1 of sequence b.
    if (r != 4) fail(fmt::format("{}: paged attention takes batched q [B, T, Hq, D], got q {}", nm(k), q.str()));
    need_rank(k, ops, 4, 2, 2);
    need_dtype(k, ops, 4, DType::I32);
    if (!(ops[4].shape[0] == q.shape[0])) shape_mismatch(k, ops, 0, 4, "block_table must hold one row of pages per sequence: [B, pages]");
  } else if (r == 4 && !(q.shape[0] == kk.shape[0])) {
    shape_mismatch(k, ops, 0, 1, "batch dimensions differ");
  }
  if (ops.size() >= 4) {
    need_rank(k, ops, 3, 1, 1);
    need_dtype(k, ops, 3, DType::I32);
    Dim want = r == 4 ? q.shape[0] : Dim(1);
    if (!(ops[3].shape[0] == want))
      shape_mismatch(k, ops, 0, 3, fmt::format("cache_pos must hold one position per sequence: [{}]", want.str()));
  }
  return {q};
}

std::vector<TensorType> infer_kv_cache_write(OpKind k, const std::vector<TensorType>& ops) {
  need_rank(k, ops, 0, 4, 4);
  need_rank(k, ops, 1, 3, 4);
  need_rank(k, ops, 2, 1, 1);
  need_same_dtype(k, ops, 0, 1);
  need_dtype(k, ops, 2, DType::I32);
  const TensorType& c = ops[0];
  const TensorType& n = ops[1];
  if (ops.size() == 4) {
    // A paged cache: c is a page pool [P, page, H, D], block_table [B, pages] maps each sequence's
    // positions to pool pages.
    need_rank(k, ops, 3, 2, 2);
    need_dtype(k, ops, 3, DType::I32);
    if (!(ops[3].shape[0] == n.shape[0])) shape_mismatch(k, ops, 1, 3, "block_table must hold one row of pages per sequence: [B, pages]");
  } else if (!(n.shape[0] == c.shape[0])) {
    shape_mismatch(k, ops, 0, 1, "batch dimensions differ");
  }
  const Dim& nh = n.shape[static_cast<size_t>(n.rank() - 2)];
  const Dim& nd = n.shape[static_cast<size_t>(n.rank() - 1)];
  if (!(nh == c.shape[2]) || !(nd == c.shape[3]))
    shape_mismatch(k, ops, 0, 1, "new entries must be [B, H, D] or [B, T, H, D] with the cache's H and D");
  if (!(ops[2].shape[0] == n.shape[0])) shape_mismatch(k, ops, 1, 2, "pos must hold one position per sequence");
  return {c};
}

std::vector<TensorType> infer_reshape(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  Shape s = attr::shape(attrs);
  for (const Dim& d : s)
    if (d.is_const() && d.value() <= 0) fail(fmt::format("{}: bad dimension {} in shape {}: dimensions must be positive", nm(k), d.value(), shape_str(s)));
  DimProduct from = dim_product(ops[0].shape);
  DimProduct to = dim_product(s);
  // An overflowed product's text would be a wrapped count ("0*T elements"): name the shape instead.
  for (const auto& [shape, p] : {std::pair{ops[0].shape, from}, std::pair{s, to}})
    if (p.overflow)
      fail(fmt::format("{}: the shape {} has more elements than int64 counts", nm(k), shape_str(shape)));
  if (!(from == to))
    fail(fmt::format("{}: shape mismatch: cannot reshape {} ({} elements) to {} ({} elements)", nm(k), ops[0].str(),
                     from.str(), shape_str(s), to.str()));
  return {{ops[0].dtype, s}};
}

std::vector<TensorType> infer_transpose(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  auto perm = attr::perm(attrs);
  const int r = ops[0].rank();
  if (static_cast<int>(perm.size()) != r)
    fail(fmt::format("{}: perm has {} entries but x is {} (rank {})", nm(k), perm.size(), ops[0].str(), r));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[static_cast<size_t>(p)])
      fail(fmt::format("{}: perm {} is not a permutation of 0..{}", nm(k), list_text(perm), r - 1));
    seen[static_cast<size_t>(p)] = true;
    out.push_back(ops[0].shape[static_cast<size_t>(p)]);
  }
  return {{ops[0].dtype, out}};
}

std::vector<TensorType> infer_split(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  const int axis = norm_axis(k, attr::axis(attrs), ops[0].rank());
  auto sizes = attr::sizes(attrs);
  if (sizes.empty()) fail(fmt::format("{}: sizes must not be empty", nm(k)));
  const Dim& d = ops[0].shape[static_cast<size_t>(axis)];
  if (!d.is_const()) fail(fmt::format("{}: cannot split symbolic dimension {} of {}", nm(k), d.str(), ops[0].str()));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s <= 0) fail(fmt::format("{}: sizes must be positive, got {}", nm(k), list_text(sizes)));
    if (__builtin_add_overflow(total, s, &total))
      fail(fmt::format("{}: sizes {} add up to more than 2^63", nm(k), list_text(sizes)));
  }
  if (total != d.value())
    fail(fmt::format("{}: shape mismatch: sizes {} add up to {} but axis {} of {} is {}", nm(k), list_text(sizes),
                     total, axis, ops[0].str(), d.value()));
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    TensorType t = ops[0];
    t.shape[static_cast<size_t>(axis)] = Dim(s);
    out.push_back(t);
  }
  return out;
}

std::vector<TensorType> infer_concat(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  const int r = ops[0].rank();
  if (r == 0) fail(fmt::format("{}: cannot concatenate scalars", nm(k)));
  const int axis = norm_axis(k, attr::axis(attrs), r);
  int64_t total = 0;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const TensorType& t = ops[static_cast<size_t>(i)];
    need_same_dtype(k, ops, 0, i);
    if (t.rank() != r) shape_mismatch(k, ops, 0, i, "ranks differ");
    for (int j = 0; j < r; ++j) {
      if (j == axis) continue;
      if (!(t.shape[static_cast<size_t>(j)] == ops[0].shape[static_cast<size_t>(j)]))
        shape_mismatch(k, ops, 0, i, fmt::format("dimension {} differs", j));
    }
    const Dim& d = t.shape[static_cast<size_t>(axis)];
    if (!d.is_const()) fail(fmt::format("{}: cannot concatenate along symbolic dimension {} of {}", nm(k), d.str(), t.str()));
    if (__builtin_add_overflow(total, d.value(), &total))
      fail(fmt::format("{}: the concatenated dimension exceeds 2^63 elements", nm(k)));
  }
  TensorType out = ops[0];
  out.shape[static_cast<size_t>(axis)] = Dim(total);
  return {out};
}

// embedding: rows of table [V, H] gathered by ids (i32, any shape): ids.shape + [H].
std::vector<TensorType> infer_embedding(OpKind k, const std::vector<TensorType>& ops) {
  need_rank(k, ops, 0, 2, 2);
  need_rank(k, ops, 1, 1, 1 << 20);
  need_dtype(k, ops, 1, DType::I32);
  Shape out = ops[1].shape;
  out.push_back(ops[0].shape[1]);
  return {{ops[0].dtype, out}};
}

// argmax over the last axis: the index (i32) of each row's first largest element.
std::vector<TensorType> infer_argmax(OpKind k, const std::vector<TensorType>& ops) {
  need_rank(k, ops, 0, 1, 1 << 20);
  need_float(k, ops, 0);
  if (last(ops[0]).is_const() && last(ops[0]).value() == 0) fail(fmt::format("{}: x {} has empty rows", nm(k), ops[0].str()));
  return {{DType::I32, Shape(ops[0].shape.begin(), ops[0].shape.end() - 1)}};
}

std::vector<TensorType> infer_reduce(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  need_rank(k, ops, 0, 1, 1 << 20);
  if (k == OpKind::ReduceMean) need_float(k, ops, 0);
  const int axis = norm_axis(k, attr::axis(attrs), ops[0].rank());
  TensorType out = ops[0];
  if (attr::keepdim(attrs)) out.shape[static_cast<size_t>(axis)] = Dim(1);
  else out.shape.erase(out.shape.begin() + axis);
  return {out};
}

// Quantize / dequantize: the scale is f32, one value ([] or [1]) or one per index of `axis`.
void check_scale(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  need_dtype(k, ops, 1, DType::F32);
  const TensorType& s = ops[1];
  const std::optional<int64_t> ax = attr::scale_axis(attrs);
  if (!ax) {
    bool scalar = s.rank() == 0 || (s.rank() == 1 && s.shape[0] == Dim(1));
    if (!scalar) shape_mismatch(k, ops, 0, 1, "a per-tensor scale (axis = none) must be f32[] or f32[1]");
    return;
  }
  const int axis = norm_axis(k, *ax, ops[0].rank());
  if (s.rank() != 1 || !(s.shape[0] == ops[0].shape[static_cast<size_t>(axis)]))
    shape_mismatch(k, ops, 0, 1, fmt::format("a per-channel scale along axis {} must be f32[{}]", axis,
                                             ops[0].shape[static_cast<size_t>(axis)].str()));
}

// Group-wise dequantize (4-bit weights, AWQ / GPTQ style): `group` consecutive elements along the
// last axis share a scale and, optionally, a zero point: w = (q - zero) * scale.
std::vector<TensorType> infer_group_dequantize(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs, int64_t g) {
  const TensorType& x = ops[0];
  if (!is_packed(x.dtype) && x.dtype != DType::I8)
    fail(fmt::format("{}: group-wise scales are for integer weights (u4, i4 or i8), got {}", nm(k), x.str()));
  if (attr::scale_axis(attrs))
    fail(fmt::format("{}: group-wise scales run along the last axis: leave axis unset (got axis = {})", nm(k), *attr::scale_axis(attrs)));
  need_rank(k, ops, 0, 1, 1 << 20);
  const Dim& kd = last(x);
  if (!kd.is_const()) fail(fmt::format("{}: group-wise scales need a constant last dimension, got {}", nm(k), x.str()));
  const int64_t kk = kd.value();
  if (!(g == 32 || g == 64 || g == 128 || g == kk))
    fail(fmt::format("{}: group must be 32, 64, 128 or the whole last dimension ({}), got {}", nm(k), kk, g));
  if (kk % g != 0) fail(fmt::format("{}: group {} does not divide the last dimension of {}", nm(k), g, x.str()));
  Shape sshape = x.shape;
  sshape.back() = Dim(kk / g);
  const TensorType& s = ops[1];
  if (!is_float(s.dtype) || is_fp8(s.dtype))
    fail(fmt::format("{}: group scales must be f32, f16 or bf16, got {}", nm(k), s.str()));
  if (!(s.shape == sshape))
    shape_mismatch(k, ops, 0, 1, fmt::format("group-wise scales of {} elements must be {}", g, shape_str(sshape)));
  if (ops.size() == 3) {
    const TensorType& z = ops[2];
    if (x.dtype != DType::U4) fail(fmt::format("{}: zero points are for unsigned codes (u4), got x {}", nm(k), x.str()));
    if (z.dtype != DType::U4 && z.dtype != DType::I8)
      fail(fmt::format("{}: zero points must be u4 (or i8 where a row has an odd number of groups), got {}", nm(k), z.str()));
    if (!(z.shape == sshape)) shape_mismatch(k, ops, 0, 2, fmt::format("zero points must have the scales' shape {}", shape_str(sshape)));
  }
  return {{attr::dtype(attrs), x.shape}};
}

// Quantize without a scale operand computes the scale and returns it in the layout the operand
// would have had: f32[] for axis = none, f32[x.shape[axis]] otherwise.
TensorType dynamic_scale_type(OpKind k, const TensorType& x, const Attrs& attrs) {
  const std::optional<int64_t> ax = attr::scale_axis(attrs);
  if (!ax) return {DType::F32, {}};
  const int axis = norm_axis(k, *ax, x.rank());
  return {DType::F32, {x.shape[static_cast<size_t>(axis)]}};
}

}  // namespace

std::vector<TensorType> infer_types(OpKind k, const std::vector<TensorType>& ops, const Attrs& attrs) {
  const OpSchema& s = op_schema(k);
  const int n = static_cast<int>(ops.size());
  if (n < s.min_operands || (s.max_operands >= 0 && n > s.max_operands)) {
    std::string names;
    for (auto o : s.operand_names) names += (names.empty() ? "" : ", ") + std::string(o);
    std::string want;
    if (s.max_operands < 0) {
      want = fmt::format("at least {}", s.min_operands);
    } else if (s.min_operands == s.max_operands) {
      want = std::to_string(s.min_operands);
    } else {
      want = fmt::format("{} {} {}", s.min_operands, s.max_operands == s.min_operands + 1 ? "or" : "to", s.max_operands);
    }
    fail(fmt::format("{}: expected {} operand{} ({}), got {}", s.name, want, s.max_operands == 1 ? "" : "s", names, n));
  }
  // 4-bit tensors are weights: dequantize reads them (a fused matmul reads the packed bytes), and no
  // op writes one (a kernel would have to pack pairs of elements).
  for (int i = 0; i < n; ++i)
    if (is_packed(ops[static_cast<size_t>(i)].dtype) && k != OpKind::Dequantize)
      fail(fmt::format("{}: {} is {}: 4-bit tensors are read only by dequantize", nm(k), opnd(k, i), ops[static_cast<size_t>(i)].str()));
  if ((k == OpKind::Cast || k == OpKind::Quantize) && is_packed(attr::dtype(attrs)))
    fail(fmt::format("{}: no op writes {} tensors: pack 4-bit weights on the host", nm(k), dtype_name(attr::dtype(attrs))));
  switch (k) {
    case OpKind::Matmul: return infer_matmul(k, ops, attrs);
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: return {infer_broadcast(k, ops)};
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Exp:
    case OpKind::Rsqrt:
    case OpKind::Softmax:
      need_float(k, ops, 0);
      if (k == OpKind::Softmax) norm_axis(k, attr::axis(attrs), ops[0].rank());
      return {ops[0]};
    case OpKind::Cast: return {{attr::dtype(attrs), ops[0].shape}};
    case OpKind::RmsNorm:
    case OpKind::LayerNorm: return infer_norm(k, ops, attrs);
    case OpKind::RmsScale: {
      need_rank(k, ops, 0, 1, 1 << 20);
      need_float(k, ops, 0);
      if (attr::eps(attrs) <= 0) fail(fmt::format("{}: eps must be positive, got {}", nm(k), attr::eps(attrs)));
      return {{DType::F32, Shape(ops[0].shape.begin(), ops[0].shape.end() - 1)}};
    }
    case OpKind::RopeTable: return infer_rope_table(k, ops, attrs);
    case OpKind::Rope: return infer_rope(k, ops);
    case OpKind::Attention: {
      if (const std::optional<double> sc = attr::scale(attrs); sc && *sc <= 0)
        fail(fmt::format("{}: scale must be positive, got {}", nm(k), AttrValue(*sc).str()));
      std::vector<TensorType> res = infer_attention(k, ops);
      // The log-sum-exp of each query row's scaled scores (natural log; -inf where a row sees no
      // key): f32, one per (token, query head), q's shape without head_dim.
      if (const std::optional<int64_t> w = attr::window(attrs)) {
        if (*w <= 0) fail(fmt::format("{}: window must be positive, got {}", nm(k), *w));
        if (!attr::causal(attrs)) fail(fmt::format("{}: a sliding window (window = {}) needs causal = true", nm(k), *w));
      }
      if (attr::returns_lse(attrs)) res.push_back({DType::F32, Shape(ops[0].shape.begin(), ops[0].shape.end() - 1)});
      return res;
    }
    case OpKind::KvCacheWrite: return infer_kv_cache_write(k, ops);
    case OpKind::Reshape: return infer_reshape(k, ops, attrs);
    case OpKind::Transpose: return infer_transpose(k, ops, attrs);
    case OpKind::Split: return infer_split(k, ops, attrs);
    case OpKind::Concat: return infer_concat(k, ops, attrs);
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMean: return infer_reduce(k, ops, attrs);
    case OpKind::Quantize:
      need_float(k, ops, 0);
      if (ops.size() == 1) return {{attr::dtype(attrs), ops[0].shape}, dynamic_scale_type(k, ops[0], attrs)};
      check_scale(k, ops, attrs);
      return {{attr::dtype(attrs), ops[0].shape}};
    case OpKind::Embedding: return infer_embedding(k, ops);
    case OpKind::Argmax: return infer_argmax(k, ops);
    case OpKind::AllReduce: {
      need_float(k, ops, 0);
      const int64_t r = attrs.has("ranks") ? attrs.get_int("ranks") : 0;
      if (r < 1 || r > 64) fail(fmt::format("{}: ranks = {}: a tensor-parallel group has 1 to 64 ranks", nm(k), r));
      return {ops[0]};
    }
    case OpKind::Dequantize:
      if (ops[0].dtype != DType::I8 && !is_fp8(ops[0].dtype) && !is_packed(ops[0].dtype))
        fail(fmt::format("{}: x must be quantized (f8e4m3, f8e5m2, i8, u4 or i4), got {}", nm(k), ops[0].str()));
      if (const std::optional<int64_t> g = attr::group(attrs)) return infer_group_dequantize(k, ops, attrs, *g);
      if (ops.size() == 3) fail(fmt::format("{}: a zero point needs group-wise scales (group = ...)", nm(k)));
      if (is_packed(ops[0].dtype))
        fail(fmt::format("{}: 4-bit codes take group-wise scales: group = 32, 64, 128, or the whole last dimension ({}) for one "
                         "scale per row", nm(k), last(ops[0]).str()));
      check_scale(k, ops, attrs);
      return {{attr::dtype(attrs), ops[0].shape}};
  }
  LJ_ASSERT(false, "no shape rule for op {}", op_name(k));
  __builtin_unreachable();
}

}  // namespace lj

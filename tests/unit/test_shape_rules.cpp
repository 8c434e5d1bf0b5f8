// Shape and dtype inference of every op, through the builder: results on good input, and the exact
// message on bad input (op name, operand, both shapes).
#include <functional>

#include <catch2/catch.hpp>

#include "tests/unit/error_of.h"

#include "layerjit/builder.h"
#include "ops/op_schema.h"

using namespace lj;

namespace {
const Dim T = Dim::sym("T");
const Dim B = Dim::sym("B");

using lj_test::error_of;
}  // namespace

TEST_CASE("matmul propagates symbols: [T, 4096] @ [6144, 4096]^T -> [T, 6144]", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 4096});
  auto w = b.param("w", DType::BF16, {6144, 4096});
  CHECK(b.matmul(x, w).type().str() == "bf16[T, 6144]");
}

TEST_CASE("matmul with batch dims and out_dtype", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F16, {B, T, 64});
  auto w = b.param("w", DType::F16, {32, 64});
  CHECK(b.matmul(x, w, DType::F32).type().str() == "f32[B, T, 32]");
}

TEST_CASE("fp8 matmul produces bf16 by default", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F8E4M3, {T, 64});
  auto w = b.param("w", DType::F8E4M3, {32, 64});
  CHECK(b.matmul(x, w).type().str() == "bf16[T, 32]");
}

TEST_CASE("matmul inner dimension mismatch names both shapes", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 4096});
  auto w = b.param("w", DType::BF16, {6144, 4000});
  CHECK(error_of([&] { b.matmul(x, w); }) ==
        "matmul: shape mismatch: x is bf16[T, 4096] but w is bf16[6144, 4000] (inner dimensions 4096 and 4000 differ)");
}

TEST_CASE("matmul dtype mismatch", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto w = b.param("w", DType::F16, {32, 64});
  CHECK(error_of([&] { b.matmul(x, w); }) == "matmul: dtype mismatch: x is bf16[T, 64] but w is f16[32, 64]");
}

TEST_CASE("matmul weight must be rank 2", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto w = b.param("w", DType::BF16, {2, 32, 64});
  CHECK(error_of([&] { b.matmul(x, w); }) == "matmul: w must have rank 2, got bf16[2, 32, 64]");
}

TEST_CASE("broadcasting follows numpy rules", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {T, 1, 64});
  auto y = b.input("y", DType::F32, {8, 64});
  auto s = b.input("s", DType::F32, {});
  CHECK(b.add(x, y).type().str() == "f32[T, 8, 64]");
  CHECK(b.mul(x, s).type().str() == "f32[T, 1, 64]");
  CHECK(b.sub(s, y).type().str() == "f32[8, 64]");
  CHECK(b.div(y, y).type().str() == "f32[8, 64]");
}

TEST_CASE("broadcast of different symbols is a shape mismatch", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {T, 64});
  auto y = b.input("y", DType::F32, {B, 64});
  CHECK(error_of([&] { b.add(x, y); }) ==
        "add: shape mismatch: a is f32[T, 64] but b is f32[B, 64] (dimensions T and B do not broadcast)");
}

TEST_CASE("elementwise dtype mismatch", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto y = b.input("y", DType::F32, {T, 64});
  CHECK(error_of([&] { b.mul(x, y); }) == "mul: dtype mismatch: a is bf16[T, 64] but b is f32[T, 64]");
}

TEST_CASE("unary float ops keep the type and reject integers", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto i = b.input("i", DType::I32, {T});
  CHECK(b.silu(x).type() == x.type());
  CHECK(b.gelu(x, "none").type() == x.type());
  CHECK(b.relu(x).type() == x.type());
  CHECK(b.exp(x).type() == x.type());
  CHECK(b.rsqrt(x).type() == x.type());
  CHECK(error_of([&] { b.silu(i); }) == "silu: x must have a floating-point dtype, got i32[T]");
}

TEST_CASE("cast changes only the dtype", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  CHECK(b.cast(x, DType::F32).type().str() == "f32[T, 64]");
}

TEST_CASE("rms_norm and layer_norm check the weight against the last dim", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto w = b.param("w", DType::BF16, {64});
  auto bias = b.param("bias", DType::BF16, {64});
  auto bad = b.param("bad", DType::BF16, {63});
  CHECK(b.rms_norm(x, w).type() == x.type());
  CHECK(b.layer_norm(x, w, bias).type() == x.type());
  CHECK(error_of([&] { b.rms_norm(x, bad); }) ==
        "rms_norm: shape mismatch: x is bf16[T, 64] but w is bf16[63] (the weight must match the last dimension of x)");
}

TEST_CASE("norm eps must be positive", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto w = b.param("w", DType::BF16, {64});
  CHECK(error_of([&] { b.rms_norm(x, w, 0.0); }) == "rms_norm: eps must be positive, got 0");
}

TEST_CASE("rope_table gives cos and sin of half the head dim", "[shape]") {
  GraphBuilder b("g");
  auto pos = b.input("pos", DType::I32, {T});
  auto [c, s] = b.rope_table(pos, 128, 500000.0);
  CHECK(c.type().str() == "f32[T, 64]");
  CHECK(s.type().str() == "f32[T, 64]");
  CHECK(error_of([&] { b.rope_table(pos, 127); }) == "rope_table: dim must be positive and even, got 127");
}

/// Each scaling takes its own parameters, all of them and no others, with their ranges checked.
TEST_CASE("rope_table scaling needs its parameters and only those", "[shape]") {
  GraphBuilder b("g");
  auto pos = b.input("pos", DType::I32, {T});
  auto op = [&](std::initializer_list<std::pair<const char*, AttrValue>> kv) {
    Attrs a;
    a.set("dim", int64_t{8});
    for (const auto& [k, v] : kv) a.set(k, v);
    return error_of([&] { b.op(OpKind::RopeTable, {pos}, a); });
  };
  CHECK(op({{"factor", 2.0}}) == "rope_table: attribute 'factor' is given without a scaling (scaling = \"linear\" or \"llama3\")");
  CHECK(op({{"scaling", std::string("linear")}}) == "rope_table: scaling = \"linear\" needs attribute 'factor'");
  CHECK(op({{"scaling", std::string("linear")}, {"factor", 2.0}, {"low_freq_factor", 1.0}}) ==
        "rope_table: scaling = \"linear\" takes no attribute 'low_freq_factor'");
  CHECK(op({{"scaling", std::string("linear")}, {"factor", -2.0}}) == "rope_table: factor must be positive, got -2");
  CHECK(op({{"scaling", std::string("llama3")}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}) ==
        "rope_table: scaling = \"llama3\" needs attribute 'original_max_pos'");
  CHECK(op({{"scaling", std::string("yarn")}}) == "rope_table: attribute 'scaling' must be one of \"linear\", \"llama3\", got \"yarn\"");
  CHECK(op({{"scaling", std::string("linear")}, {"factor", 2.0}}) == "(no error)");
}

/// A window is positive and needs the causal mask.
TEST_CASE("attention's window must be positive and causal", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {T, 4, 16});
  auto k = b.input("k", DType::BF16, {T, 2, 16});
  CHECK(error_of([&] { b.attention(q, k, k, true, std::nullopt, std::nullopt, std::nullopt, 0); }) ==
        "attention: window must be positive, got 0");
  CHECK(error_of([&] { b.attention(q, k, k, false, std::nullopt, std::nullopt, std::nullopt, 4); }) ==
        "attention: a sliding window (window = 4) needs causal = true");
}

/// embedding: ids.shape + [H] in the table's dtype; argmax: i32 without the last axis.
TEST_CASE("embedding and argmax shapes", "[shape]") {
  GraphBuilder b("g");
  auto table = b.param("table", DType::BF16, {301, 72});
  auto ids = b.input("ids", DType::I32, {T});
  CHECK(b.embedding(table, ids).type().str() == "bf16[T, 72]");
  auto fids = b.input("fids", DType::F32, {T});
  CHECK(error_of([&] { b.embedding(table, fids); }) == "embedding: dtype mismatch: ids must be i32, got f32[T]");
  auto logits = b.input("logits", DType::F32, {T, 301});
  CHECK(b.argmax(logits).type().str() == "i32[T]");
  CHECK(error_of([&] { b.argmax(ids); }) == "argmax: x must have a floating-point dtype, got i32[T]");
}

TEST_CASE("rope checks tables against x", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 8, 128});
  auto c = b.input("c", DType::F32, {T, 64});
  auto s = b.input("s", DType::F32, {T, 64});
  auto c2 = b.input("c2", DType::F32, {T, 32});
  CHECK(b.rope(x, c, s).type() == x.type());
  CHECK(b.rope(x, c, s, "interleaved").type() == x.type());
  CHECK(error_of([&] { b.rope(x, c2, s); }) ==
        "rope: shape mismatch: x is bf16[T, 8, 128] but cos is f32[T, 32] (last dimension must be head_dim/2 = 64)");
}

TEST_CASE("rope with an odd head dim is rejected", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 8, 127});
  auto c = b.input("c", DType::F32, {T, 63});
  CHECK(error_of([&] { b.rope(x, c, c); }) == "rope: head dimension of x must be an even constant, got bf16[T, 8, 127]");
}

TEST_CASE("softmax axis is checked", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {T, 64});
  CHECK(b.softmax(x, 0).type() == x.type());
  CHECK(error_of([&] { b.softmax(x, 2); }) == "softmax: axis 2 is out of range for rank 2");
}

TEST_CASE("attention: GQA prefill and batched decode", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {T, 32, 128});
  auto k = b.input("k", DType::BF16, {T, 8, 128});
  CHECK(b.attention(q, k, k, true).type() == q.type());
  auto qd = b.input("qd", DType::BF16, {B, 1, 32, 128});
  auto kc = b.input("kc", DType::BF16, {B, Dim::sym("C"), 8, 128});
  auto pos = b.input("pos", DType::I32, {B});
  CHECK(b.attention(qd, kc, kc, true, 0.1, pos).type() == qd.type());
  // lse = true: a second result, f32 per (sequence, token, query head).
  auto [o, lse] = b.attention_with_lse(qd, kc, kc, true, {}, pos);
  CHECK(o.type() == qd.type());
  CHECK(lse.type() == TensorType{DType::F32, {B, 1, 32}});
  CHECK(b.attention_with_lse(q, k, k, false).second.type() == TensorType{DType::F32, {T, 32}});
}

TEST_CASE("attention: query heads must be a multiple of KV heads", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {T, 30, 128});
  auto k = b.input("k", DType::BF16, {T, 8, 128});
  CHECK(error_of([&] { b.attention(q, k, k, true); }) ==
        "attention: query heads (30) are not a multiple of key/value heads (8): q is bf16[T, 30, 128], k is bf16[T, 8, 128]");
}

TEST_CASE("attention: head dims, ranks, k/v shapes and cache_pos", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {T, 32, 128});
  auto k64 = b.input("k64", DType::BF16, {T, 8, 64});
  auto k = b.input("k", DType::BF16, {T, 8, 128});
  auto v = b.input("v", DType::BF16, {T, 4, 128});
  auto k4 = b.input("k4", DType::BF16, {1, T, 8, 128});
  auto pos = b.input("pos", DType::I32, {B});
  CHECK(error_of([&] { b.attention(q, k64, k64, false); }) ==
        "attention: shape mismatch: q is bf16[T, 32, 128] but k is bf16[T, 8, 64] (head_dim 128 and 64 differ)");
  CHECK(error_of([&] { b.attention(q, k, v, false); }) ==
        "attention: shape mismatch: k is bf16[T, 8, 128] but v is bf16[T, 4, 128] (k and v must have the same shape)");
  CHECK(error_of([&] { b.attention(q, k4, k4, false); }).find("q and k must have the same rank") != std::string::npos);
  CHECK(error_of([&] { b.attention(q, k, k, false, {}, pos); }).find("cache_pos must hold one position per sequence: [1]") !=
        std::string::npos);
  CHECK(error_of([&] { b.attention(q, k, k, false, -1.0); }) == "attention: scale must be positive, got -1.0");
}

TEST_CASE("paged attention and cache writes: pools, block tables and their errors", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {B, 1, 32, 128});
  auto pool = b.input("pool", DType::BF16, {Dim::sym("P"), 16, 8, 128});
  auto pos = b.input("pos", DType::I32, {B});
  auto bt = b.input("bt", DType::I32, {B, Dim::sym("NB")});
  auto kn = b.input("kn", DType::BF16, {B, 8, 128});
  CHECK(b.attention(q, pool, pool, true, {}, pos, bt).type() == q.type());
  CHECK(b.kv_cache_write(pool, kn, pos, bt).type() == pool.type());
  auto q3 = b.input("q3", DType::BF16, {T, 32, 128});
  auto pos1 = b.input("pos1", DType::I32, {1});
  auto bt1 = b.input("bt1", DType::I32, {1, 4});
  CHECK(error_of([&] { b.attention(q3, b.input("p3", DType::BF16, {T, 8, 128}), b.input("p4", DType::BF16, {T, 8, 128}), true, {}, pos1, bt1); }) ==
        "attention: paged attention takes batched q [B, T, Hq, D], got q bf16[T, 32, 128]");
  auto btf = b.input("btf", DType::F32, {B, 4});
  CHECK(error_of([&] { b.attention(q, pool, pool, true, {}, pos, btf); }).find("block_table") != std::string::npos);
  auto bt2 = b.input("bt2", DType::I32, {Dim::sym("X"), 4});
  CHECK(error_of([&] { b.attention(q, pool, pool, true, {}, pos, bt2); })
            .find("block_table must hold one row of pages per sequence: [B, pages]") != std::string::npos);
  CHECK(error_of([&] { b.kv_cache_write(pool, kn, pos, bt2); })
            .find("block_table must hold one row of pages per sequence: [B, pages]") != std::string::npos);
  CHECK(error_of([&] { b.attention(q, pool, pool, true, {}, {}, bt); }) ==
        "attention: a block_table needs cache_pos (the paged cache's positions)");
}

TEST_CASE("attention head counts must be constants", "[shape]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {T, Dim::sym("H"), 128});
  auto k = b.input("k", DType::BF16, {T, 8, 128});
  CHECK(error_of([&] { b.attention(q, k, k, false); }) ==
        "attention: head counts and head_dim must be constants, got q bf16[T, H, 128] and k bf16[T, 8, 128]");
}

TEST_CASE("kv_cache_write: single token and chunk, checked against the cache", "[shape]") {
  GraphBuilder b("g");
  auto cache = b.input("cache", DType::BF16, {B, Dim::sym("C"), 8, 128});
  auto one = b.input("one", DType::BF16, {B, 8, 128});
  auto chunk = b.input("chunk", DType::BF16, {B, T, 8, 128});
  auto bad = b.input("bad", DType::BF16, {B, 4, 128});
  auto pos = b.input("pos", DType::I32, {B});
  CHECK(b.kv_cache_write(cache, one, pos).type() == cache.type());
  CHECK(b.kv_cache_write(cache, chunk, pos).type() == cache.type());
  CHECK(error_of([&] { b.kv_cache_write(cache, bad, pos); }).find("new entries must be [B, H, D] or [B, T, H, D]") !=
        std::string::npos);
}

TEST_CASE("kv_cache_write positions must be i32", "[shape]") {
  GraphBuilder b("g");
  auto cache = b.input("cache", DType::BF16, {B, 16, 8, 128});
  auto one = b.input("one", DType::BF16, {B, 8, 128});
  auto pos = b.input("pos", DType::F32, {B});
  CHECK(error_of([&] { b.kv_cache_write(cache, one, pos); }) == "kv_cache_write: dtype mismatch: pos must be i32, got f32[B]");
}

TEST_CASE("reshape keeps the symbolic element count", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 4096});
  CHECK(b.reshape(x, {T, 32, 128}).type().str() == "bf16[T, 32, 128]");
  CHECK(error_of([&] { b.reshape(x, {T, 32, 100}); }) ==
        "reshape: shape mismatch: cannot reshape bf16[T, 4096] (4096*T elements) to [T, 32, 100] (3200*T elements)");
  CHECK(error_of([&] { b.reshape(x, {B, 4096}); }).find("cannot reshape") != std::string::npos);
  CHECK(error_of([&] { b.reshape(x, {T, -1}); }) ==
        "reshape: bad dimension -1 in shape [T, -1]: dimensions must be positive");
}

TEST_CASE("transpose permutes dims and validates the permutation", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 8, 128});
  CHECK(b.transpose(x, {1, 0, 2}).type().str() == "bf16[8, T, 128]");
  CHECK(error_of([&] { b.transpose(x, {0, 0, 1}); }) == "transpose: perm [0, 0, 1] is not a permutation of 0..2");
  CHECK(error_of([&] { b.transpose(x, {0, 1}); }) == "transpose: perm has 2 entries but x is bf16[T, 8, 128] (rank 3)");
}

TEST_CASE("split gives one result per size", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 6144});
  auto parts = b.split(x, 1, {4096, 1024, 1024});
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].type().str() == "bf16[T, 4096]");
  CHECK(parts[2].type().str() == "bf16[T, 1024]");
  CHECK(b.split(x, -1, {6144}).size() == 1);
}

TEST_CASE("sizes that overflow int64 are an error, not undefined behaviour", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  auto big = b.input("big", DType::I8, {INT64_MAX});  // one byte each: INT64_MAX bytes still count
  CHECK(error_of([&] { b.split(x, 0, {INT64_MAX, INT64_MAX}); }) ==
        "split: sizes [9223372036854775807, 9223372036854775807] add up to more than 2^63");
  CHECK(error_of([&] { b.concat({big, big}, 0); }) == "concat: the concatenated dimension exceeds 2^63 elements");
  // A tensor is refused where it is declared when its bytes overflow, naming it.
  CHECK(error_of([&] { b.input("wide", DType::F32, {INT64_MAX}); }) ==
        "%wide: 9223372036854775807 elements of f32 are more bytes than int64 counts");
  CHECK(error_of([&] { b.input("square", DType::BF16, {Dim::sym("T"), 1LL << 32, 1LL << 32}); }) ==
        "%square: a bf16[1, 4294967296, 4294967296] tensor has more elements than int64 counts");
  // numel itself is checked (its wrapped product was undefined behaviour under UBSan).
  CHECK(numel({1LL << 31, 1LL << 31}) == 1LL << 62);
  CHECK(numel({0, INT64_MAX, 3}) == 0);
  CHECK(error_of([&] { (void)numel({1LL << 32, 1LL << 32}); }) == "a [4294967296, 4294967296] tensor has more elements than int64 counts");
}

TEST_CASE("bindings that make a value's bytes overflow int64 are refused naming the value", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 4096});
  auto y = b.silu(x).named("y");
  const Graph g = b.finish({y});
  Bindings ok, big, half;
  ok.set("T", 7);
  big.set("T", 1LL << 56);
  half.set("T", 1LL << 50);  // 2^62 elements, 2^63 bytes
  g.check_sizes(ok);
  g.check_sizes(Bindings{});  // unbound symbols: nothing to check
  CHECK(error_of([&] { g.check_sizes(big); }) ==
        "@g: %x (bf16[T, 4096]) at these sizes: a bf16[72057594037927936, 4096] tensor has more elements than int64 counts");
  CHECK(error_of([&] { g.check_sizes(half); }) ==
        "@g: %x (bf16[T, 4096]) at these sizes: 4611686018427387904 elements of bf16 are more bytes than int64 counts");
}

TEST_CASE("shape attributes name symbols that print back unambiguously", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {Dim::sym("T"), 4});
  Attrs a;
  a.set("shape", AttrList{AttrValue(Name{"bf16"}), AttrValue(4)});
  CHECK(error_of([&] { b.op(OpKind::Reshape, {x}, a); }).find("reshape: attribute 'shape' must be a shape") == 0);
}

TEST_CASE("split errors: sizes must add up, symbolic axes cannot split", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 6144});
  CHECK(error_of([&] { b.split(x, 1, {4096, 1024}); }) ==
        "split: shape mismatch: sizes [4096, 1024] add up to 5120 but axis 1 of bf16[T, 6144] is 6144");
  CHECK(error_of([&] { b.split(x, 0, {1, 2}); }) == "split: cannot split symbolic dimension T of bf16[T, 6144]");
  CHECK(error_of([&] { b.split(x, 1, {6145, -1}); }) == "split: sizes must be positive, got [6145, -1]");
  CHECK(error_of([&] { b.split(x, 1, {}); }) == "split: sizes must not be empty");
}

TEST_CASE("concat sums constant axes", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 4096});
  auto y = b.input("y", DType::BF16, {T, 1024});
  auto z = b.input("z", DType::BF16, {B, 1024});
  CHECK(b.concat({x, y, y}, 1).type().str() == "bf16[T, 6144]");
  CHECK(error_of([&] { b.concat({x, z}, 1); }) ==
        "concat: shape mismatch: inputs[0] is bf16[T, 4096] but inputs[1] is bf16[B, 1024] (dimension 0 differs)");
  CHECK(error_of([&] { b.concat({x, x}, 0); }) ==
        "concat: cannot concatenate along symbolic dimension T of bf16[T, 4096]");
}

TEST_CASE("reductions drop or keep the axis", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {T, 64});
  CHECK(b.reduce_sum(x, 1).type().str() == "f32[T]");
  CHECK(b.reduce_max(x, 0).type().str() == "f32[64]");
  CHECK(b.reduce_mean(x, -1).type().str() == "f32[T]");
  Attrs keep;
  keep.set("axis", 1);
  keep.set("keepdim", true);
  CHECK(b.op(OpKind::ReduceSum, {x}, keep)[0].type().str() == "f32[T, 1]");
}

TEST_CASE("quantize per tensor and per channel", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto s1 = b.input("s1", DType::F32, {});
  auto sc = b.input("sc", DType::F32, {64});
  auto q = b.quantize(x, s1, DType::F8E4M3);
  CHECK(q.type().str() == "f8e4m3[T, 64]");
  CHECK(b.quantize(x, sc, DType::I8, -1).type().str() == "i8[T, 64]");
  CHECK(b.dequantize(q, s1, DType::BF16).type().str() == "bf16[T, 64]");
}

TEST_CASE("quantize without a scale returns the codes and the scale it computes", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto [q, s] = b.dynamic_quantize(x, DType::F8E4M3, 0);
  CHECK(q.type().str() == "f8e4m3[T, 64]");
  CHECK(s.type().str() == "f32[T]");
  CHECK(b.dynamic_quantize(x, DType::I8, -1).second.type().str() == "f32[64]");
  CHECK(b.dynamic_quantize(x, DType::F8E5M2).second.type().str() == "f32[]");
  // The scale it returns is exactly the operand the static form takes.
  CHECK(b.quantize(x, s, DType::F8E4M3, 0).type().str() == "f8e4m3[T, 64]");
}

TEST_CASE("quantize without a scale: axis, dtypes and result count are checked", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto i = b.input("i", DType::I32, {T, 64});
  CHECK(error_of([&] { b.dynamic_quantize(x, DType::I8, 2); }) == "quantize: axis 2 is out of range for rank 2");
  CHECK(error_of([&] { b.dynamic_quantize(x, DType::F16, 0); }) ==
        "quantize: attribute 'dtype' must be one of \"f8e4m3\", \"f8e5m2\", \"i8\", got f16");
  CHECK(error_of([&] { b.dynamic_quantize(i, DType::I8, 0); }) ==
        "quantize: x must have a floating-point dtype, got i32[T, 64]");
  Attrs a;
  a.set("dtype", DType::I8);
  CHECK(error_of([&] { b.op(OpKind::Quantize, {x}, a, {}, {"q"}); }) ==
        "quantize: produces 2 results but 1 name is given (without a scale operand quantize computes the scale and "
        "returns it too: %q, %scale = quantize(%x) {...})");
}

TEST_CASE("quantize scale shape and target dtype are checked", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto sc = b.input("sc", DType::F32, {64});
  auto s1 = b.input("s1", DType::F32, {1});
  CHECK(error_of([&] { b.quantize(x, sc, DType::F8E4M3); }) ==
        "quantize: shape mismatch: x is bf16[T, 64] but scale is f32[64] (a per-tensor scale (axis = none) must be f32[] or f32[1])");
  CHECK(error_of([&] { b.quantize(x, s1, DType::BF16); }) ==
        "quantize: attribute 'dtype' must be one of \"f8e4m3\", \"f8e5m2\", \"i8\", got bf16");
  CHECK(error_of([&] { b.dequantize(x, s1, DType::BF16); }) ==
        "dequantize: x must be quantized (f8e4m3, f8e5m2, i8, u4 or i4), got bf16[T, 64]");
}

TEST_CASE("wrong operand counts name the expected operands", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  CHECK(error_of([&] { b.op(OpKind::RmsNorm, {x}); }) == "rms_norm: expected 2 operands (x, w), got 1");
  CHECK(error_of([&] { b.op(OpKind::Silu, {x, x}); }) == "silu: expected 1 operand (x), got 2");
  CHECK(error_of([&] { b.op(OpKind::Attention, {x}, {}); }) ==
        "attention: expected 3 to 5 operands (q, k, v, cache_pos, block_table), got 1");
  CHECK(error_of([&] { b.op(OpKind::Concat, {}, {}); }).find("missing required attribute 'axis'") != std::string::npos);
}

TEST_CASE("attributes: unknown, missing, wrong kind, bad choice", "[shape]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {T, 64});
  auto w = b.param("w", DType::BF16, {64});
  Attrs unknown;
  unknown.set("epsilon", 1e-6);
  CHECK(error_of([&] { b.op(OpKind::RmsNorm, {x, w}, unknown); }) ==
        "rms_norm: unknown attribute 'epsilon' (expected one of: eps)");
  Attrs none_taken;
  none_taken.set("alpha", 1.0);
  CHECK(error_of([&] { b.op(OpKind::Silu, {x}, none_taken); }) == "silu: unknown attribute 'alpha' (silu takes no attributes)");
  CHECK(error_of([&] { b.op(OpKind::Cast, {x}); }) == "cast: missing required attribute 'dtype' (a dtype)");
  Attrs wrong;
  wrong.set("eps", "small");
  CHECK(error_of([&] { b.op(OpKind::RmsNorm, {x, w}, wrong); }) ==
        "rms_norm: attribute 'eps' must be a float, got string \"small\"");
  CHECK(error_of([&] { b.rope(x, x, x, "sideways"); }) ==
        "rope: attribute 'style' must be one of \"half\", \"interleaved\", got \"sideways\"");
}

TEST_CASE("defaults are filled in schema order", "[shape]") {
  Attrs given;
  given.set("theta", 1e4);
  given.set("dim", 8);
  Attrs a = check_attrs(OpKind::RopeTable, given);
  REQUIRE(a.items().size() == 2);
  CHECK(a.items()[0].first == "dim");
  Attrs g = check_attrs(OpKind::Gelu, {});
  CHECK(g.get_string("approx") == "tanh");
  Attrs q;
  q.set("dtype", DType::I8);
  CHECK(check_attrs(OpKind::Quantize, q).find("axis")->str() == "none");
}

TEST_CASE("every op kind has a schema whose name matches op_kinds.def", "[shape]") {
  for (OpKind k : all_op_kinds()) {
    const OpSchema& s = op_schema(k);
    CHECK(s.kind == k);
    CHECK(s.name == op_name(k));
    CHECK(parse_op_kind(s.name) == k);
    CHECK(s.min_operands >= 1);
  }
  CHECK_FALSE(parse_op_kind("conv2d").has_value());
}

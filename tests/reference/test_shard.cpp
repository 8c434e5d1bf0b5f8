// Tensor parallelism on the CPU: the sharding pass's rank graphs, run rank by rank through the
// reference with the all-reduce done on the host (run_reference_ranks), equal the unsharded layer
// within bf16 rounding (each rank's partial sums are rounded to bf16 before they are added), for
// prefill and decode at tp = 2 and 4; the weight slicing round-trips; what does not divide is
// refused with the reason.
#include <cmath>

#include "layerjit/error.h"
#include "layerjit/llama.h"
#include "layerjit/shard.h"
#include "layerjit/text.h"
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::random_tensor;
using Inputs = std::map<std::string, HostTensor>;

Inputs layer_inputs(const LlamaConfig& c, const Graph& g, const Bindings& b, uint64_t seed) {
  Inputs in;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    const std::vector<int64_t> shape = resolve(v.type.shape, b);
    if (v.type.dtype == DType::I32) {  // positions: the prefill's 0..T-1, decode's inside the cache
      std::vector<double> p;
      for (int64_t i = 0; i < shape[0]; ++i) p.push_back(b.get("C") ? static_cast<double>((3 * i + 2) % *b.get("C")) : static_cast<double>(i));
      in[v.name] = test::tensor(DType::I32, shape, p);
    } else if (is_packed(v.type.dtype)) {  // 4-bit codes and zero points
      HostTensor t(v.type.dtype, shape);
      fill_codes(t, ++seed);
      in[v.name] = std::move(t);
    } else if (v.name.ends_with("_s")) {  // group scales: code steps of a weight about +-1 / sqrt(K)
      in[v.name] = random_tensor(v.type.dtype, shape, ++seed, 0.5 / static_cast<double>(c.hidden), 2.0 / static_cast<double>(c.hidden));
    } else if (shape.size() == 1) {
      in[v.name] = random_tensor(v.type.dtype, shape, ++seed, 0.5, 1.5);  // norm weights
    } else {
      const double a = v.is_param ? std::sqrt(3.0 / static_cast<double>(shape.back())) : 1.0;
      in[v.name] = random_tensor(v.type.dtype, shape, ++seed, -a, a);
    }
  }
  return in;
}

void check_sharded(const LlamaConfig& c, bool decode, int tp, const Bindings& b, uint64_t seed, bool fold = true) {
  const Graph g = decode ? llama_decode(c) : llama_prefill(c);
  INFO(g.name() << " at tp = " << tp << (fold ? ", residuals folded" : ""));
  const Inputs full = layer_inputs(c, g, b, seed);
  const std::vector<HostTensor> want = run_reference(g, full, b);
  ShardOptions so;
  so.fold_residuals = fold;
  const ShardedGraph s = shard(g, tp, so);
  for (const Graph* rg : {&s.graph, &s.others}) {
    int reduces = 0, adds = 0;
    for (const Node& n : rg->nodes()) reduces += n.kind == OpKind::AllReduce, adds += n.kind == OpKind::Add;
    CHECK(reduces == 2);  // after o and after down
    // The layer's two residual adds: on rank 0 before the all_reduces when folded, on no other rank.
    CHECK(adds == (fold && rg == &s.others ? 0 : 2));
  }
  CHECK(s.graph.nodes().size() == s.others.nodes().size() + (fold ? 2 : 0));
  std::vector<Inputs> ranks(static_cast<size_t>(tp));
  for (int r = 0; r < tp; ++r)
    for (const auto& [name, t] : full) ranks[static_cast<size_t>(r)][name] = shard_tensor(t, s.inputs.at(name), tp, r);
  const auto got = run_reference_ranks(s.graph, s.others, ranks, b);
  REQUIRE(want.size() == s.outputs.size());
  for (size_t o = 0; o < want.size(); ++o) {
    std::vector<HostTensor> parts;
    for (const auto& outs : got) parts.push_back(outs.at(o));
    if (!s.outputs[o].split())
      for (const HostTensor& p : parts) CHECK(p.data == parts[0].data);  // replicated: equal on every rank
    const HostTensor merged = gather_tensor(parts, s.outputs[o], tp);
    REQUIRE(merged.shape == want[o].shape);
    double worst = 0;
    for (size_t i = 0; i < want[o].data.size(); ++i)
      worst = std::max(worst, std::fabs(merged.data[i] - want[o].data[i]) / std::max(std::fabs(want[o].data[i]), 1.0));
    INFO("output " << o << ": worst difference " << worst);
    CHECK(worst <= 0x1p-5);  // a few bf16 ulps: partial sums rounded before the all-reduce
    if (s.outputs[o].split()) CHECK(merged.data == want[o].data);  // K and V: computed before any all-reduce, exact
  }
}

TEST_CASE("sharded layers equal the unsharded layer at tp = 2 and 4 (prefill and decode)", "[shard]") {
  // The small layer (4 query heads, 2 KV heads, FFN 160) at tp = 2; one with 8 query heads, 4 KV
  // heads, FFN 200 and head_dim 24 (no power of two) at tp = 2 and 4.
  const LlamaConfig small = LlamaConfig::small();
  const LlamaConfig odd{"llama_tp", 96, 8, 4, 24, 200, 1e-5, 10000.0, DType::BF16};
  Bindings pre, dec;
  pre.set("T", 7);
  dec.set("B", 3), dec.set("C", 11);
  uint64_t seed = 500;
  check_sharded(small, false, 2, pre, seed += 100);
  check_sharded(small, true, 2, dec, seed += 100);
  check_sharded(small, true, 2, dec, seed += 100, false);
  check_sharded(odd, false, 2, pre, seed += 100, false);
  for (int tp : {2, 4}) {
    check_sharded(odd, false, tp, pre, seed += 100);
    check_sharded(odd, true, tp, dec, seed += 100);
  }
}

TEST_CASE("4-bit layers shard too: codes, scales and zero points cut with their weight, by whole groups along K", "[shard]") {
  LlamaConfig c{"llama_q4", 128, 4, 2, 32, 256, 1e-5, 10000.0, DType::BF16};
  c.quant = LlamaConfig::WeightQuant{DType::U4, 32, DType::F16, true};
  Bindings pre, dec;
  pre.set("T", 5);
  dec.set("B", 2), dec.set("C", 9);
  check_sharded(c, false, 2, pre, 900);
  check_sharded(c, true, 2, dec, 1000);
  const ShardedGraph s = shard(llama_decode(c), 2);
  CHECK(s.inputs.at("w_qkv_q").str() == "split on axis 0 in pieces [128, 64, 64]");
  CHECK(s.inputs.at("w_qkv_s").str() == "split on axis 0 in pieces [128, 64, 64]");
  CHECK(s.inputs.at("w_down_q").str() == "split on axis 1");
  CHECK(s.inputs.at("w_down_z").pieces == std::vector<int64_t>{8});  // 256 columns in groups of 32
  // With groups of 64, o's 128 columns over 4 ranks would cut a group in half.
  LlamaConfig wide{"llama_q4", 128, 4, 4, 32, 256, 1e-5, 10000.0, DType::BF16};
  wide.quant = LlamaConfig::WeightQuant{DType::U4, 64, DType::F16, true};
  CHECK_THROWS_WITH(shard(llama_decode(wide), 4), Catch::Contains("%o = matmul: the 128 columns of %w_o do not split over 4 ranks into whole groups of 64"));
}

// A quantized MLP block as the fp8 and W8A8 layers write theirs: per-token activation quantization,
// a column-parallel then a row-parallel projection, the residual add.
constexpr const char* kW8a8Block = R"(graph @w8a8_block(%x: bf16[T, 64], %w_up: param i8[96, 64], %s_up: param f32[96],
    %w_down: param i8[64, 96], %s_down: param f32[64]) {
  %xq, %x_scale = quantize(%x) {dtype = i8, axis = 0}
  %up_acc = matmul(%xq, %w_up, %x_scale) {out_dtype = f32}
  %up_scaled = mul(%up_acc, %s_up)
  %up = cast(%up_scaled) {dtype = bf16}
  %act = silu(%up)
  %aq, %a_scale = quantize(%act) {dtype = i8, axis = 0}
  %d_acc = matmul(%aq, %w_down, %a_scale) {out_dtype = f32}
  %d_scaled = mul(%d_acc, %s_down)
  %d = cast(%d_scaled) {dtype = bf16}
  %y = add(%x, %d)
  return %y
}
)";
constexpr const char* kFp8Block = R"(graph @fp8_block(%x: bf16[T, 64], %w_up: param f8e4m3[96, 64], %s_up: param f32[1],
    %w_down: param f8e4m3[64, 96], %s_down: param f32[1]) {
  %xq, %x_scale = quantize(%x) {dtype = f8e4m3, axis = 0}
  %up_rs = mul(%x_scale, %s_up)
  %up = matmul(%xq, %w_up, %up_rs)
  %act = silu(%up)
  %aq, %a_scale = quantize(%act) {dtype = f8e4m3, axis = 0}
  %down_rs = mul(%a_scale, %s_down)
  %d = matmul(%aq, %w_down, %down_rs)
  %y = add(%x, %d)
  return %y
}
)";

TEST_CASE("fp8 and W8A8 blocks shard: each rank quantizes its part of a row with its own scale", "[shard]") {
  for (const char* text : {kW8a8Block, kFp8Block}) {
    const Graph g = parse_module(text, "<block>").graphs.at(0);
    INFO(g.name());
    Bindings b;
    b.set("T", 5);
    Inputs full;
    uint64_t seed = 77;
    for (ValueId id : g.inputs()) {
      const ValueInfo& v = g.value(id);
      const std::vector<int64_t> shape = resolve(v.type.shape, b);
      if (v.type.dtype == DType::I8) full[v.name] = random_tensor(DType::F32, shape, ++seed, -127.4, 127.4), full[v.name].dtype = DType::I8;
      else if (v.name.starts_with("s_") && v.type.shape.size() == 1 && shape[0] > 1) full[v.name] = random_tensor(DType::F32, shape, ++seed, 0.002, 0.004);
      else if (v.name.starts_with("s_")) full[v.name] = random_tensor(DType::F32, shape, ++seed, 0.5, 1.5);  // fp8: per-tensor
      else if (is_fp8(v.type.dtype)) full[v.name] = random_tensor(v.type.dtype, shape, ++seed, -0.2, 0.2);
      else full[v.name] = random_tensor(v.type.dtype, shape, ++seed, -1.0, 1.0);
    }
    for (auto& [name, t] : full)
      if (t.dtype == DType::I8)
        for (double& e : t.data) e = std::round(e);
    const std::vector<HostTensor> want = run_reference(g, full, b);
    const ShardedGraph s = shard(g, 2);
    std::vector<Inputs> ranks(2);
    for (int r = 0; r < 2; ++r)
      for (const auto& [name, t] : full) ranks[static_cast<size_t>(r)][name] = shard_tensor(t, s.inputs.at(name), 2, r);
    const auto got = run_reference_ranks(s.graph, s.others, ranks, b);
    CHECK(got[0][0].data == got[1][0].data);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want[0].data.size(); ++i) {
      worst = std::max(worst, std::fabs(got[0][0].data[i] - want[0].data[i]));
      scale = std::max(scale, std::fabs(want[0].data[i]));
    }
    INFO("worst " << worst << " of " << scale);
    CHECK(worst <= scale / 16);  // quantized per rank, with finer scales than the whole row's
    double moved = 0;  // the block's own contribution, so that the comparison says something
    for (size_t i = 0; i < want[0].data.size(); ++i) moved = std::max(moved, std::fabs(want[0].data[i] - full.at("x").data[i]));
    CHECK(moved > scale / 8);
    int adds = 0;
    for (const Node& n : s.others.nodes()) adds += n.kind == OpKind::Add;
    CHECK(adds == 0);  // the residual is rank 0's, folded before the all_reduce
  }
  // A per-rank scale may feed only a row-parallel matmul's row scale.
  const Graph bad = parse_module(R"(graph @bad(%x: bf16[T, 64], %w: param bf16[96, 64]) {
  %h = matmul(%x, %w)
  %hq, %h_scale = quantize(%h) {dtype = f8e4m3, axis = 0}
  %y = rms_scale(%h_scale)
  return %y
}
)", "<bad>").graphs.at(0);
  CHECK_THROWS_WITH(shard(bad, 2), Catch::Contains("%h_scale differs per rank"));
}

TEST_CASE("shard splits QKV by head groups, gate with up, o and down by columns, and says what does not divide", "[shard]") {
  const LlamaConfig c{"llama_tp", 96, 8, 4, 24, 200, 1e-5, 10000.0, DType::BF16};
  const ShardedGraph s = shard(llama_prefill(c), 2);
  CHECK(s.inputs.at("w_qkv").str() == "split on axis 0 in pieces [192, 96, 96]");
  CHECK(s.inputs.at("w_gate_up").str() == "split on axis 0 in pieces [200, 200]");
  CHECK(s.inputs.at("w_o").str() == "split on axis 1");
  CHECK(s.inputs.at("w_down").str() == "split on axis 1");
  CHECK(s.inputs.at("x").str() == "replicated");
  CHECK(s.inputs.at("attn_norm").str() == "replicated");
  const ShardedGraph d = shard(llama_decode(c), 4);
  CHECK(d.inputs.at("k_cache").str() == "split on axis 2");
  CHECK(d.outputs.at(0).str() == "replicated");
  CHECK(d.outputs.at(1).str() == "split on axis 2");
  // The small layer's 2 KV heads do not divide over 4 ranks; 160 FFN columns not over 3.
  CHECK_THROWS_WITH(shard(llama_prefill(LlamaConfig::small()), 4), Catch::Contains("is not divisible by 4 ranks"));
  CHECK_THROWS_WITH(shard(llama_prefill(LlamaConfig::small()), 3), Catch::Contains("not divisible by 3 ranks"));
  CHECK_THROWS_WITH(shard(llama_prefill(c), 0), Catch::Contains("1 to 64 ranks"));
  // A norm over a split axis needs every rank's part of the row.
  Module m = parse_module(
      "graph @bad(%x: bf16[T, 8], %w: param bf16[16, 8], %n: param bf16[16]) {\n  %y = matmul(%x, %w)\n"
      "  %z = rms_norm(%y, %n)\n  return %z\n}\n", "<bad>");
  CHECK_THROWS_WITH(shard(m.graphs.at(0), 2), Catch::Contains("%z = rms_norm: it reduces over %y's last axis, which is split"));
}

TEST_CASE("shard_tensor and gather_tensor invert each other, pieces included", "[shard]") {
  const HostTensor w = random_tensor(DType::BF16, {12, 5}, 9);
  const ShardSpec rows{0, {6, 3, 3}};
  std::vector<HostTensor> parts;
  for (int r = 0; r < 3; ++r) parts.push_back(shard_tensor(w, rows, 3, r));
  CHECK(parts[1].shape == std::vector<int64_t>{4, 5});
  CHECK(parts[1].data[0] == w.data[2 * 5]);        // row 2: rank 1's first of piece 0 (rows 0-5)
  CHECK(parts[1].data[2 * 5] == w.data[7 * 5]);    // row 7: its row of piece 1 (rows 6-8)
  CHECK(gather_tensor(parts, rows, 3).data == w.data);
  const ShardSpec cols{1, {5}};
  CHECK_THROWS_WITH(shard_tensor(w, cols, 2, 0), Catch::Contains("not divisible"));
}

// Raw elements of a tensor whose values are small integers, as i32 little-endian bytes.
std::vector<unsigned char> i32_bytes(const HostTensor& t) {
  std::vector<unsigned char> out;
  for (double x : t.data) {
    const auto v = static_cast<uint32_t>(static_cast<int32_t>(x));
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<unsigned char>(v >> (8 * k)));
  }
  return out;
}

TEST_CASE("shard_bytes cuts raw elements as shard_tensor cuts values, 4-bit codes included", "[shard]") {
  HostTensor w(DType::I32, {2, 12, 3});
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<double>(i * 7 % 101) - 50;
  for (const ShardSpec& spec : {ShardSpec{1, {6, 3, 3}}, ShardSpec{0, {2}}, ShardSpec{2, {3}}, ShardSpec{}})
    for (int tp : {1, 3}) {
      if (spec.axis == 0 && tp == 3) continue;
      for (int r = 0; r < tp; ++r) {
        INFO("spec " << spec.str() << ", tp " << tp << ", rank " << r);
        CHECK(shard_bytes(i32_bytes(w), DType::I32, w.shape, spec, tp, r) == i32_bytes(shard_tensor(w, spec, tp, r)));
      }
    }
  // u4 [4, 8]: each row 4 bytes; cut by rows, or by columns in runs of 4 codes (2 bytes).
  std::vector<unsigned char> codes(16);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<unsigned char>(0x11 * i);
  CHECK(shard_bytes(codes, DType::U4, {4, 8}, ShardSpec{0, {4}}, 2, 1) == std::vector<unsigned char>(codes.begin() + 8, codes.end()));
  CHECK(shard_bytes(codes, DType::U4, {4, 8}, ShardSpec{1, {8}}, 2, 1) ==
        std::vector<unsigned char>{codes[2], codes[3], codes[6], codes[7], codes[10], codes[11], codes[14], codes[15]});
  CHECK(shard_bytes(codes, DType::U4, {4, 8}, ShardSpec{1, {8}}, 4, 3) == std::vector<unsigned char>{codes[3], codes[7], codes[11], codes[15]});
  const std::vector<unsigned char> odd(codes.begin(), codes.begin() + 6);  // u4 [2, 6]: 3 codes per rank
  CHECK_THROWS_WITH(shard_bytes(odd, DType::U4, {2, 6}, ShardSpec{1, {6}}, 2, 1), Catch::Contains("inside a byte"));
  CHECK_THROWS_WITH(shard_bytes(codes, DType::U4, {4, 6}, ShardSpec{1, {6}}, 2, 0), Catch::Contains("16 bytes for a u4 tensor"));
}

}  // namespace
}  // namespace lj

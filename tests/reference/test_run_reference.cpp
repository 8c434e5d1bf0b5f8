// run_reference on small graphs: results against formulas written here (a matmul + activation chain,
// SwiGLU), outputs that are inputs or repeated, and every input-check error with its message.
#include <cmath>

#include "layerjit/builder.h"
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::random_tensor;
using test::tensor;

// y = silu(x @ w^T) : f32[T, 3]; s = reduce_sum(y, 1) : f32[T]
Graph mlp_graph() {
  GraphBuilder b("mlp");
  Value x = b.input("x", DType::F32, {Dim::sym("T"), 5});
  Value w = b.param("w", DType::F32, {3, 5});
  Value y = b.silu(b.matmul(x, w)).named("y");
  Value s = b.reduce_sum(y, 1).named("s");
  return b.finish({y, s});
}

Bindings bind_t(int64_t t) {
  Bindings b;
  b.set("T", t);
  return b;
}

TEST_CASE("run_reference evaluates a matmul, silu and reduce chain", "[run_reference]") {
  std::map<std::string, HostTensor> in;
  in["x"] = random_tensor(DType::F32, {4, 5}, 111);
  in["w"] = random_tensor(DType::F32, {3, 5}, 112);
  auto out = run_reference(mlp_graph(), in, bind_t(4));
  REQUIRE(out.size() == 2);
  REQUIRE(out[0].shape == std::vector<int64_t>{4, 3});
  REQUIRE(out[1].shape == std::vector<int64_t>{4});
  for (int64_t t = 0; t < 4; ++t) {
    double row = 0;
    for (int64_t n = 0; n < 3; ++n) {
      double z = 0;
      for (int64_t k = 0; k < 5; ++k) z += in["x"].data[static_cast<size_t>(t * 5 + k)] * in["w"].data[static_cast<size_t>(n * 5 + k)];
      const double y = z / (1 + std::exp(-z));
      CHECK(out[0].data[static_cast<size_t>(t * 3 + n)] == Approx(y).epsilon(1e-6).margin(1e-7));
      row += out[0].data[static_cast<size_t>(t * 3 + n)];
    }
    CHECK(out[1].data[static_cast<size_t>(t)] == Approx(row).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("run_reference of a SwiGLU block", "[run_reference]") {
  // act = silu(gate) * up with gate, up = split(gu): two f32 roundings away from the exact product.
  GraphBuilder b("swiglu");
  Value gu = b.input("gu", DType::F32, {Dim::sym("T"), 14});
  auto parts = b.split(gu, 1, {7, 7});
  Value act = b.mul(b.silu(parts[0]), parts[1]).named("act");
  Graph g = b.finish({act});
  std::map<std::string, HostTensor> in;
  in["gu"] = random_tensor(DType::F32, {3, 14}, 113, -4.0, 4.0);
  auto out = run_reference(g, in, bind_t(3));
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t i = 0; i < 7; ++i) {
      const double gate = in["gu"].data[static_cast<size_t>(t * 14 + i)];
      const double up = in["gu"].data[static_cast<size_t>(t * 14 + 7 + i)];
      const double want = gate / (1 + std::exp(-gate)) * up;
      CHECK(std::fabs(out[0].data[static_cast<size_t>(t * 7 + i)] - want) <= std::fabs(want) * 0x1p-22 + 1e-30);
    }
}

TEST_CASE("run_reference returns inputs and repeated outputs", "[run_reference]") {
  GraphBuilder b("passthrough");
  Value x = b.input("x", DType::BF16, {2, 3});
  Value y = b.relu(x).named("y");
  Graph g = b.finish({x, y, y});
  std::map<std::string, HostTensor> in;
  in["x"] = random_tensor(DType::BF16, {2, 3}, 114);
  auto out = run_reference(g, in, {});
  REQUIRE(out.size() == 3);
  CHECK(out[0].data == in["x"].data);
  CHECK(out[1].data == out[2].data);
  for (size_t i = 0; i < 6; ++i) CHECK(out[1].data[i] == std::max(0.0, in["x"].data[i]));
}

std::map<std::string, HostTensor> mlp_inputs() {
  std::map<std::string, HostTensor> in;
  in["x"] = random_tensor(DType::F32, {4, 5}, 115);
  in["w"] = random_tensor(DType::F32, {3, 5}, 116);
  return in;
}

TEST_CASE("run_reference: a missing input is named", "[run_reference]") {
  auto in = mlp_inputs();
  in.erase("w");
  CHECK_THROWS_WITH(run_reference(mlp_graph(), in, bind_t(4)), Catch::Contains("missing input 'w'") && Catch::Contains("f32[3, 5]"));
}

TEST_CASE("run_reference: an extra input is named", "[run_reference]") {
  auto in = mlp_inputs();
  in["bias"] = random_tensor(DType::F32, {3}, 117);
  CHECK_THROWS_WITH(run_reference(mlp_graph(), in, bind_t(4)), Catch::Contains("no input 'bias'") && Catch::Contains("x, w"));
}

TEST_CASE("run_reference: a wrong dtype names the input and both types", "[run_reference]") {
  auto in = mlp_inputs();
  in["x"] = random_tensor(DType::BF16, {4, 5}, 118);
  CHECK_THROWS_WITH(run_reference(mlp_graph(), in, bind_t(4)),
                    Catch::Contains("input 'x'") && Catch::Contains("f32[T, 5]") && Catch::Contains("bf16"));
}

TEST_CASE("run_reference: a wrong bound shape names the input and both shapes", "[run_reference]") {
  auto in = mlp_inputs();
  in["x"] = random_tensor(DType::F32, {4, 6}, 119);
  CHECK_THROWS_WITH(run_reference(mlp_graph(), in, bind_t(4)),
                    Catch::Contains("input 'x'") && Catch::Contains("[4, 5]") && Catch::Contains("[4, 6]"));
  // The right shape for another binding is still wrong for this one.
  CHECK_THROWS_WITH(run_reference(mlp_graph(), mlp_inputs(), bind_t(5)),
                    Catch::Contains("expected [5, 5]") && Catch::Contains("got [4, 5]"));
}

TEST_CASE("run_reference: an unbound or non-positive symbol is an error", "[run_reference]") {
  CHECK_THROWS_WITH(run_reference(mlp_graph(), mlp_inputs(), {}), Catch::Contains("symbol 'T'"));
  CHECK_THROWS_WITH(run_reference(mlp_graph(), mlp_inputs(), bind_t(0)), Catch::Contains("must be positive"));
}

TEST_CASE("run_reference: a value the dtype cannot hold is an error", "[run_reference]") {
  GraphBuilder b("id");
  Value x = b.input("x", DType::BF16, {3});
  Graph g = b.finish({b.relu(x)});
  std::map<std::string, HostTensor> in;
  in["x"] = HostTensor(DType::BF16, {3});
  in["x"].data = {1.0, 0.1, 2.0};  // 0.1 is not a bf16 value; never rounded
  CHECK_THROWS_WITH(run_reference(g, in, {}), Catch::Contains("input 'x' element 1") && Catch::Contains("round_to_dtype"));
  in["x"].round_to_dtype();
  CHECK_NOTHROW(run_reference(g, in, {}));
}

}  // namespace
}  // namespace lj

// all_reduce: its schema and shape rule, the text form, and the reference of one rank (a copy);
// over more ranks the reference needs the other ranks' partials and says so.
#include "tests/reference/ref_test_util.h"

#include "layerjit/error.h"
#include "layerjit/text.h"

namespace lj {
namespace {

using test::random_tensor;

TEST_CASE("all_reduce keeps x's type, prints and parses, and refuses a group of no ranks", "[all_reduce]") {
  const char* text =
      "graph @ar(%x: bf16[T, 7]) {\n"
      "  %y = all_reduce(%x) {ranks = 2}\n"
      "  return %y\n"
      "}\n";
  Module m = parse_module(text, "<ar>");
  const Graph& g = m.graphs.at(0);
  const Node& n = g.node(0);
  CHECK(n.kind == OpKind::AllReduce);
  CHECK(g.value(n.results[0]).type == g.value(n.operands[0]).type);
  CHECK(print_graph(g).find("all_reduce(%x) {op = \"sum\", ranks = 2}") != std::string::npos);  // the default op printed
  CHECK_THROWS_WITH(parse_module("graph @b(%x: bf16[3]) {\n  %y = all_reduce(%x) {ranks = 0}\n  return %y\n}\n", "<b>"),
                    Catch::Contains("ranks = 0: a tensor-parallel group has 1 to 64 ranks"));
  CHECK_THROWS_WITH(parse_module("graph @c(%x: i32[3]) {\n  %y = all_reduce(%x) {ranks = 2}\n  return %y\n}\n", "<c>"),
                    Catch::Contains("all_reduce"));
}

TEST_CASE("all_reduce's reference: one rank copies x, more ranks need run_reference_ranks", "[all_reduce]") {
  HostTensor x = random_tensor(DType::BF16, {3, 5}, 17);
  Attrs one;
  one.set("ranks", int64_t{1});
  const TensorType t{DType::BF16, {3, 5}};
  const std::vector<HostTensor> y = reference_op(OpKind::AllReduce, {&x}, one, {t}, {});
  REQUIRE(y.size() == 1);
  CHECK(y[0].data == x.data);
  Attrs two;
  two.set("ranks", int64_t{2});
  CHECK_THROWS_WITH(reference_op(OpKind::AllReduce, {&x}, two, {t}, {}), Catch::Contains("needs every rank's partial sum"));
}

}  // namespace
}  // namespace lj

namespace lj {
namespace {

/// A row-parallel matmul over 3 ranks, each with a third of K: the ranks' partials summed by the host
/// all-reduce equal the unsharded product within one bf16 rounding of each partial; every rank gets
/// the same sum; a rank's bad input fails all of them with that rank's error.
TEST_CASE("run_reference_ranks sums the ranks' partials at each all_reduce", "[all_reduce]") {
  const int64_t m = 5, n = 7, k = 12, ranks = 3;
  Module full = parse_module("graph @f(%x: bf16[5, 12], %w: param bf16[7, 12]) {\n  %y = matmul(%x, %w) {out_dtype = f32}\n  return %y\n}\n", "<f>");
  Module part = parse_module(
      "graph @p(%x: bf16[5, 4], %w: param bf16[7, 4]) {\n  %y = matmul(%x, %w) {out_dtype = f32}\n"
      "  %s = all_reduce(%y) {ranks = 3}\n  return %s\n}\n", "<p>");
  const HostTensor x = test::random_tensor(DType::BF16, {m, k}, 5), w = test::random_tensor(DType::BF16, {n, k}, 6);
  const std::vector<HostTensor> want = run_reference(full.graphs.at(0), {{"x", x}, {"w", w}}, {});
  std::vector<std::map<std::string, HostTensor>> in(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<double> xs, ws;  // columns [r K / 3, (r + 1) K / 3) of x and W
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k / ranks; ++j) xs.push_back(x.data[static_cast<size_t>(i * k + r * (k / ranks) + j)]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k / ranks; ++j) ws.push_back(w.data[static_cast<size_t>(i * k + r * (k / ranks) + j)]);
    in[static_cast<size_t>(r)] = {{"x", test::tensor(DType::BF16, {m, k / ranks}, xs)}, {"w", test::tensor(DType::BF16, {n, k / ranks}, ws)}};
  }
  const auto got = run_reference_ranks(part.graphs.at(0), in, {});
  REQUIRE(got.size() == 3);
  for (const auto& outs : got) {
    REQUIRE(outs.size() == 1);
    CHECK(outs[0].data == got[0][0].data);
    for (size_t i = 0; i < outs[0].data.size(); ++i) CHECK(outs[0].data[i] == Approx(want[0].data[i]).epsilon(1e-6).margin(1e-6));
  }
  in[1]["x"].data[0] = 0.1;  // not a bf16 value: rank 1 fails, ranks 0 and 2 stop at the all_reduce
  CHECK_THROWS_WITH(run_reference_ranks(part.graphs.at(0), in, {}), Catch::Contains("input 'x' element 0 is 0.1"));
}

}  // namespace
}  // namespace lj

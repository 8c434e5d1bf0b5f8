// embedding and argmax against loops written here, and their errors.
#include "tests/reference/ref_test_util.h"

#include "layerjit/error.h"

namespace lj {
namespace {

using test::random_tensor;
using test::run1;
using test::tensor;

/// Rows of the table by id, ids of rank 2 included; repeated ids repeat rows.
TEST_CASE("embedding gathers the table's rows by id", "[embedding]") {
  HostTensor table = random_tensor(DType::BF16, {11, 6}, 90);
  HostTensor ids = tensor(DType::I32, {2, 3}, {3, 0, 10, 3, 7, 1});
  HostTensor y = run1(OpKind::Embedding, {&table, &ids});
  REQUIRE(y.shape == std::vector<int64_t>{2, 3, 6});
  CHECK(y.dtype == DType::BF16);
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t i = 0; i < 6; ++i)
      CHECK(y.data[static_cast<size_t>(n * 6 + i)] == table.data[static_cast<size_t>(static_cast<int64_t>(ids.data[static_cast<size_t>(n)]) * 6 + i)]);
  HostTensor bad = tensor(DType::I32, {2}, {4, 11});
  CHECK_THROWS_WITH(run1(OpKind::Embedding, {&table, &bad}), Catch::Contains("embedding: ids[1] = 11 is not a row of the 11-row table"));
}

/// The first largest element of each row; NaN wins as in torch.argmax.
TEST_CASE("argmax finds each row's first largest element", "[argmax]") {
  HostTensor x = random_tensor(DType::F32, {5, 13}, 91);
  HostTensor y = run1(OpKind::Argmax, {&x});
  REQUIRE(y.shape == std::vector<int64_t>{5});
  CHECK(y.dtype == DType::I32);
  for (int64_t r = 0; r < 5; ++r) {
    int64_t best = 0;
    for (int64_t i = 1; i < 13; ++i)
      if (x.data[static_cast<size_t>(r * 13 + i)] > x.data[static_cast<size_t>(r * 13 + best)]) best = i;
    CHECK(y.data[static_cast<size_t>(r)] == static_cast<double>(best));
  }
  HostTensor ties = tensor(DType::F32, {1, 4}, {1.0, 3.0, 3.0, 2.0});
  CHECK(run1(OpKind::Argmax, {&ties}).data == std::vector<double>{1});
  HostTensor nan = tensor(DType::F32, {1, 4}, {1.0, 3.0, std::nan(""), 5.0});
  CHECK(run1(OpKind::Argmax, {&nan}).data == std::vector<double>{2});
}

}  // namespace
}  // namespace lj

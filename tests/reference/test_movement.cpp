// reshape, transpose, split and concat: element positions checked by explicit index arithmetic.
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::run_op;

TEST_CASE("reshape keeps row-major order, with a bound symbol in the target shape", "[movement]") {
  HostTensor x = random_tensor(DType::BF16, {3, 10}, 91);
  AttrList shape = {AttrValue(Name{"T"}), AttrValue(2), AttrValue(5)};
  Bindings b;
  b.set("T", 3);
  HostTensor y = run1(OpKind::Reshape, {&x}, attrs({{"shape", shape}}), b);
  CHECK(y.shape == std::vector<int64_t>{3, 2, 5});
  CHECK(y.data == x.data);
  CHECK(y.dtype == DType::BF16);
}

TEST_CASE("transpose [2, 3, 4] by perm [2, 0, 1]", "[movement]") {
  HostTensor x = random_tensor(DType::F32, {2, 3, 4}, 92);
  HostTensor y = run1(OpKind::Transpose, {&x}, attrs({{"perm", AttrList{2, 0, 1}}}));
  REQUIRE(y.shape == std::vector<int64_t>{4, 2, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k)
        CHECK(y.data[static_cast<size_t>((k * 2 + i) * 3 + j)] == x.data[static_cast<size_t>((i * 3 + j) * 4 + k)]);
}

TEST_CASE("transpose swapping the last two axes of a rank-4 tensor", "[movement]") {
  HostTensor x = random_tensor(DType::F32, {2, 3, 5, 2}, 93);
  HostTensor y = run1(OpKind::Transpose, {&x}, attrs({{"perm", AttrList{0, 1, 3, 2}}}));
  REQUIRE(y.shape == std::vector<int64_t>{2, 3, 2, 5});
  for (int64_t a = 0; a < 6; ++a)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 2; ++j)
        CHECK(y.data[static_cast<size_t>((a * 2 + j) * 5 + i)] == x.data[static_cast<size_t>((a * 5 + i) * 2 + j)]);
}

TEST_CASE("split along a middle axis into unequal parts", "[movement]") {
  HostTensor x = random_tensor(DType::F32, {2, 6, 3}, 94);
  auto parts = run_op(OpKind::Split, {&x}, attrs({{"axis", 1}, {"sizes", AttrList{1, 3, 2}}}));
  REQUIRE(parts.size() == 3);
  const int64_t starts[3] = {0, 1, 4};
  const int64_t sizes[3] = {1, 3, 2};
  for (int p = 0; p < 3; ++p) {
    REQUIRE(parts[static_cast<size_t>(p)].shape == std::vector<int64_t>{2, sizes[p], 3});
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < sizes[p]; ++j)
        for (int64_t k = 0; k < 3; ++k)
          CHECK(parts[static_cast<size_t>(p)].data[static_cast<size_t>((i * sizes[p] + j) * 3 + k)] ==
                x.data[static_cast<size_t>((i * 6 + starts[p] + j) * 3 + k)]);
  }
}

TEST_CASE("split along the last axis (negative index) and concat undoes it", "[movement]") {
  HostTensor x = random_tensor(DType::BF16, {3, 11}, 95);
  auto parts = run_op(OpKind::Split, {&x}, attrs({{"axis", -1}, {"sizes", AttrList{4, 7}}}));
  REQUIRE(parts.size() == 2);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 0; j < 4; ++j)
      CHECK(parts[0].data[static_cast<size_t>(r * 4 + j)] == x.data[static_cast<size_t>(r * 11 + j)]);
    for (int64_t j = 0; j < 7; ++j)
      CHECK(parts[1].data[static_cast<size_t>(r * 7 + j)] == x.data[static_cast<size_t>(r * 11 + 4 + j)]);
  }
  HostTensor back = run1(OpKind::Concat, {&parts[0], &parts[1]}, attrs({{"axis", 1}}));
  CHECK(back.shape == x.shape);
  CHECK(back.data == x.data);
}

TEST_CASE("concat of three tensors along axis 0", "[movement]") {
  HostTensor a = random_tensor(DType::F32, {1, 4}, 96);
  HostTensor b = random_tensor(DType::F32, {3, 4}, 97);
  HostTensor c = random_tensor(DType::F32, {2, 4}, 98);
  HostTensor y = run1(OpKind::Concat, {&a, &b, &c}, attrs({{"axis", 0}}));
  REQUIRE(y.shape == std::vector<int64_t>{6, 4});
  std::vector<double> want = a.data;
  want.insert(want.end(), b.data.begin(), b.data.end());
  want.insert(want.end(), c.data.begin(), c.data.end());
  CHECK(y.data == want);
}

}  // namespace
}  // namespace lj

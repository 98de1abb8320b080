//===- GemmTest.cpp - The batched matrix product compiled kernels call ----===//

#include "runtime/exec/Gemm.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

using namespace mtc::rt;

namespace {

/// A [batch, rows, cols] view of `storage` at `offset` with the given strides.
MemRef3F32 view(std::vector<float> &storage, int64_t offset, std::array<int64_t, 3> sizes,
                std::array<int64_t, 3> strides) {
  return {storage.data(), storage.data(), offset, {sizes[0], sizes[1], sizes[2]},
          {strides[0], strides[1], strides[2]}};
}

float &at(const MemRef3F32 &m, int64_t i, int64_t j, int64_t l) {
  return m.aligned[m.offset + i * m.strides[0] + j * m.strides[1] + l * m.strides[2]];
}

/// Storage of `size` elements numbered so that every product differs.
std::vector<float> numbered(size_t size) {
  std::vector<float> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = static_cast<float>((i * 7 + 3) % 23) / 8.0f - 1.0f;
  return values;
}

/// Checks c += a x b against a double-precision loop, c's elements outside the view
/// untouched.
void expectProduct(MemRef3F32 a, MemRef3F32 b, MemRef3F32 c, std::vector<float> &cStorage) {
  std::vector<double> expected(cStorage.begin(), cStorage.end());
  for (int64_t i = 0; i < c.sizes[0]; ++i)
    for (int64_t j = 0; j < c.sizes[1]; ++j)
      for (int64_t n = 0; n < c.sizes[2]; ++n) {
        double sum = 0;
        for (int64_t l = 0; l < a.sizes[2]; ++l)
          sum += double(at(a, i, j, l)) * double(at(b, i, l, n));
        expected[size_t(c.offset + i * c.strides[0] + j * c.strides[1] + n * c.strides[2])] += sum;
      }
  _mlir_ciface_mtc_batch_matmul_f32(nullptr, &a, &b, &c);
  for (size_t e = 0; e < cStorage.size(); ++e)
    EXPECT_NEAR(cStorage[e], expected[e], 1e-5 * (1 + std::abs(expected[e]))) << "element " << e;
}

} // namespace

TEST(GemmTest, ContiguousBatchesAccumulate) {
  auto a = numbered(2 * 3 * 4), b = numbered(2 * 4 * 5), c = numbered(2 * 3 * 5);
  expectProduct(view(a, 0, {2, 3, 4}, {12, 4, 1}), view(b, 0, {2, 4, 5}, {20, 5, 1}),
                view(c, 0, {2, 3, 5}, {15, 5, 1}), c);
}

TEST(GemmTest, PaddedRowsOffsetsAndBatchStrides) {
  // Leading dimensions larger than the rows, gaps between batches, nonzero offsets.
  auto a = numbered(200), b = numbered(300), c = numbered(200);
  expectProduct(view(a, 3, {3, 4, 5}, {40, 7, 1}), view(b, 5, {3, 5, 6}, {60, 9, 1}),
                view(c, 1, {3, 4, 6}, {50, 8, 1}), c);
}

TEST(GemmTest, ContiguousColumnsAreReadTransposed) {
  // a[i] is the transpose of a row-major [k, m] matrix, b[i] of a [n, k] one.
  auto a = numbered(2 * 4 * 3), b = numbered(2 * 5 * 4), c = numbered(2 * 3 * 5);
  expectProduct(view(a, 0, {2, 3, 4}, {12, 1, 3}), view(b, 0, {2, 4, 5}, {20, 1, 4}),
                view(c, 0, {2, 3, 5}, {15, 5, 1}), c);
}

TEST(GemmTest, ContiguousResultColumnsAreWrittenTransposed) {
  // c[i] is the transpose of a row-major [n, m] matrix (a product written into the buffer
  // it was to be transposed into), with every combination of operand layouts.
  for (bool aColumns : {false, true})
    for (bool bColumns : {false, true}) {
      auto a = numbered(2 * 3 * 4), b = numbered(2 * 4 * 5), c = numbered(2 * 3 * 5);
      expectProduct(view(a, 0, {2, 3, 4}, aColumns ? std::array<int64_t, 3>{12, 1, 3}
                                                   : std::array<int64_t, 3>{12, 4, 1}),
                    view(b, 0, {2, 4, 5}, bColumns ? std::array<int64_t, 3>{20, 1, 4}
                                                   : std::array<int64_t, 3>{20, 5, 1}),
                    view(c, 0, {2, 3, 5}, {15, 1, 3}), c);
    }
}

TEST(GemmTest, OtherLayoutsUseLoops) {
  // No contiguous dimension in a.
  auto a = numbered(100), b = numbered(2 * 4 * 5), c = numbered(2 * 3 * 5);
  expectProduct(view(a, 1, {2, 3, 4}, {40, 10, 2}), view(b, 0, {2, 4, 5}, {20, 5, 1}),
                view(c, 0, {2, 3, 5}, {15, 1, 3}), c);
}

TEST(GemmTest, UnitDimensionsIgnoreTheirStrides) {
  // A matrix-vector product whose unit dimensions have strides no dense layout would give.
  auto a = numbered(2 * 3 * 4), b = numbered(2 * 4), c = numbered(2 * 3);
  expectProduct(view(a, 0, {2, 3, 4}, {12, 4, 1}), view(b, 0, {2, 4, 1}, {4, 1, 0}),
                view(c, 0, {2, 3, 1}, {3, 1, 0}), c);
}

TEST(GemmTest, EmptyProductsChangeNothing) {
  auto a = numbered(8), b = numbered(8), c = numbered(8);
  std::vector<float> before = c;
  MemRef3F32 noK[] = {view(a, 0, {1, 2, 0}, {0, 1, 1}), view(b, 0, {1, 0, 4}, {0, 4, 1}),
                      view(c, 0, {1, 2, 4}, {8, 4, 1})};
  _mlir_ciface_mtc_batch_matmul_f32(nullptr, &noK[0], &noK[1], &noK[2]);
  MemRef3F32 noRows[] = {view(a, 0, {1, 0, 2}, {0, 2, 1}), view(b, 0, {1, 2, 4}, {8, 4, 1}),
                         view(c, 0, {1, 0, 4}, {0, 4, 1})};
  _mlir_ciface_mtc_batch_matmul_f32(nullptr, &noRows[0], &noRows[1], &noRows[2]);
  EXPECT_EQ(c, before);
}


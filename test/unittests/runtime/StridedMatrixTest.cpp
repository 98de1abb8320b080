//===- StridedMatrixTest.cpp - How a GEMM reads a strided matrix -----------===//

#include "runtime/support/StridedMatrix.h"

#include <gtest/gtest.h>

using namespace mtc::rt;

namespace {

void expectRead(std::optional<StridedMatrix> m, bool transposed, int64_t leading) {
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->transposed, transposed);
  EXPECT_EQ(m->leading, leading);
}

} // namespace

TEST(StridedMatrixTest, ContiguousRowsAreReadAsStored) {
  expectRead(stridedMatrix(4, 3, 3, 1), false, 3);
  // A padded row: the leading dimension is the row stride.
  expectRead(stridedMatrix(4, 3, 8, 1), false, 8);
}

TEST(StridedMatrixTest, ContiguousColumnsAreReadTransposed) {
  expectRead(stridedMatrix(4, 3, 1, 4), true, 4);
  expectRead(stridedMatrix(4, 3, 1, 6), true, 6);
}

TEST(StridedMatrixTest, TheStrideOfASizeOneDimensionDecidesNothing) {
  // One row: any row stride; the leading dimension is at least the row's length.
  expectRead(stridedMatrix(1, 5, 123, 1), false, 5);
  // One column read transposed, whatever its column stride.
  expectRead(stridedMatrix(5, 1, 1, 77), false, 1);
  expectRead(stridedMatrix(1, 1, 0, 0), false, 1);
}

TEST(StridedMatrixTest, NeitherRowsNorColumnsContiguousIsNotReadable) {
  EXPECT_FALSE(stridedMatrix(4, 3, 6, 2).has_value());
  // Overlapping rows (a row stride below the row's length).
  EXPECT_FALSE(stridedMatrix(4, 3, 2, 1).has_value());
}

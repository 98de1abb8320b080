//===- GemmDescriptionTest.cpp - GEMM descriptions: checks, cache key, row-major mapping -===//

#include "runtime/device/cuda/GemmDescription.h"
#include "runtime/device/cuda/CublasLtGemm.h"

#include <gtest/gtest.h>

#include <functional>
#include <unordered_set>
#include <vector>

namespace mtc::rt::cuda::test {
namespace {

TEST(GemmDescription, DenseLeadingDimensions) {
  GemmDescription d = GemmDescription::dense(3, 5, 7);
  EXPECT_EQ(d.lda, 7);
  EXPECT_EQ(d.ldb, 5);
  EXPECT_EQ(d.ldc, 5);
  EXPECT_TRUE(validateGemm(d).ok());
  GemmDescription t = GemmDescription::dense(3, 5, 7, /*transA=*/true, /*transB=*/true);
  EXPECT_EQ(t.lda, 3); // A stored k x m
  EXPECT_EQ(t.ldb, 7); // B stored n x k
  EXPECT_TRUE(validateGemm(t).ok());
  EXPECT_FALSE(t.allowTf32);
}

TEST(GemmDescription, InvalidDescriptionsAreNamed) {
  auto message = [](const GemmDescription &d) { return validateGemm(d).message(); };
  GemmDescription d = GemmDescription::dense(4, 8, 16);
  d.lda = 15;
  EXPECT_EQ(message(d), "GEMM 4x8x16: lda 15 is less than A's row of 16 elements");
  d = GemmDescription::dense(4, 8, 16, /*transA=*/false, /*transB=*/true);
  d.ldb = 8;
  EXPECT_EQ(message(d), "GEMM 4x8x16: ldb 8 is less than B's row of 16 elements");
  d = GemmDescription::dense(4, 8, 16);
  d.ldc = 4;
  EXPECT_EQ(message(d), "GEMM 4x8x16: ldc 4 is less than C's row of 8 elements");
  d = GemmDescription::dense(0, 8, 16);
  EXPECT_EQ(message(d), "GEMM 0x8x16: m, n and k must be positive");
  d = GemmDescription::dense(4, 8, 16, false, false, MTC_I32);
  EXPECT_EQ(message(d), "GEMM 4x8x16: element type code 4 is not f32, bf16 or f16");
  d = GemmDescription::dense(4, 8, 16, false, false, MTC_BF16);
  d.allowTf32 = true;
  EXPECT_EQ(message(d), "GEMM 4x8x16: TF32 applies to f32 products only");
  d = GemmDescription::dense(4, 8, 16);
  d.f32Output = true;
  EXPECT_EQ(message(d), "GEMM 4x8x16: an f32 output applies to bf16 and f16 products only");
  d = GemmDescription::dense(4, 8, 16);
  d.batch = 2;
  d.epilogue = GemmEpilogue::BiasGradB;
  EXPECT_EQ(message(d), "GEMM 4x8x16: a bias-gradient epilogue needs batch 1, not 2");
  d.epilogue = GemmEpilogue(9);
  EXPECT_EQ(message(d), "GEMM 4x8x16: unknown epilogue code 9");
  d = GemmDescription::dense(4, 8, 16);
  d.batch = 0;
  EXPECT_EQ(message(d), "GEMM 4x8x16: batch 0 must be positive and fit in 32 bits");
  d.batch = int64_t(1) << 31;
  EXPECT_FALSE(validateGemm(d).ok());
}

TEST(GemmDescription, BatchStrides) {
  GemmDescription d = GemmDescription::dense(4, 8, 16);
  d.batch = 3;
  EXPECT_TRUE(validateGemm(d).ok());
  d.strideA = 0; // one A for the whole batch
  EXPECT_TRUE(validateGemm(d).ok());
  d.strideA = 63; // A spans 64 elements
  EXPECT_EQ(validateGemm(d).message(), "GEMM 4x8x16: strideA 63 overlaps consecutive A matrices");
  d = GemmDescription::dense(4, 8, 16);
  d.batch = 2;
  d.strideC = 0; // results of a batch may not overwrite each other
  EXPECT_FALSE(validateGemm(d).ok());
  d = GemmDescription::dense(4, 8, 16);
  d.batch = 2;
  d.strideB = -128;
  EXPECT_FALSE(validateGemm(d).ok());
  // A single product ignores the strides.
  d.batch = 1;
  EXPECT_TRUE(validateGemm(d).ok());
}

// Every field of the description is part of the cache key: changing any one gives a
// different key (and, for these, a different hash).
TEST(GemmDescription, CacheKeyCoversEveryField) {
  GemmDescription base = GemmDescription::dense(64, 128, 256);
  base.batch = 2;
  std::vector<std::function<void(GemmDescription &)>> changes = {
      [](auto &d) { d.m += 1; },
      [](auto &d) { d.n += 1; },
      [](auto &d) { d.k += 1; },
      [](auto &d) { d.transA = !d.transA; },
      [](auto &d) { d.transB = !d.transB; },
      [](auto &d) { d.lda += 1; },
      [](auto &d) { d.ldb += 1; },
      [](auto &d) { d.ldc += 1; },
      [](auto &d) { d.batch += 1; },
      [](auto &d) { d.strideA += 1; },
      [](auto &d) { d.strideB += 1; },
      [](auto &d) { d.strideC += 1; },
      [](auto &d) { d.dtype = MTC_BF16; },
      [](auto &d) { d.allowTf32 = true; },
      [](auto &d) { d.epilogue = GemmEpilogue::Bias; },
  };
  std::unordered_set<GemmDescription, GemmDescriptionHash> keys{base};
  std::unordered_set<size_t> hashes{GemmDescriptionHash()(base)};
  for (size_t i = 0; i < changes.size(); ++i) {
    GemmDescription d = base;
    changes[i](d);
    EXPECT_FALSE(d == base) << "change " << i;
    EXPECT_TRUE(keys.insert(d).second) << "change " << i << " collides with another key";
    EXPECT_TRUE(hashes.insert(GemmDescriptionHash()(d)).second) << "change " << i;
  }
  // Equal descriptions are one key.
  EXPECT_FALSE(keys.insert(base).second);
  GemmDescription same = GemmDescription::dense(64, 128, 256);
  same.batch = 2;
  EXPECT_EQ(GemmDescriptionHash()(same), GemmDescriptionHash()(base));

  // The alignment of the operands is part of the prepared product's key.
  GemmCacheKey aligned{base, 256}, unaligned{base, 4};
  EXPECT_FALSE(aligned == unaligned);
  EXPECT_NE(GemmCacheKeyHash()(aligned), GemmCacheKeyHash()(unaligned));
}

TEST(GemmDescription, EpilogueVectors) {
  EXPECT_TRUE(readsBias(GemmEpilogue::Bias));
  EXPECT_TRUE(readsBias(GemmEpilogue::BiasGelu));
  EXPECT_FALSE(readsBias(GemmEpilogue::Gelu));
  EXPECT_FALSE(readsBias(GemmEpilogue::BiasGradB));
  EXPECT_TRUE(writesBiasGradient(GemmEpilogue::BiasGradA));
  EXPECT_TRUE(writesBiasGradient(GemmEpilogue::BiasGradB));
  EXPECT_FALSE(writesBiasGradient(GemmEpilogue::Bias));
  EXPECT_FALSE(writesBiasGradient(GemmEpilogue::None));
}

TEST(GemmDescription, OperandAlignment) {
  alignas(256) static char buffer[1024];
  EXPECT_EQ(operandAlignment({buffer}), 256u);
  EXPECT_EQ(operandAlignment({buffer, buffer + 512}), 256u);
  EXPECT_EQ(operandAlignment({buffer, buffer + 16}), 16u);
  EXPECT_EQ(operandAlignment({buffer + 4, buffer + 16}), 4u);
  EXPECT_EQ(operandAlignment({buffer, nullptr}), 256u); // an absent bias does not count
  EXPECT_EQ(operandAlignment({buffer + 1}), 1u);
}

// C = A B row-major is C^T = B^T A^T column-major: the operands, sizes, transposes and
// leading dimensions swap.
TEST(GemmDescription, RowMajorMapsToTheTransposedColumnMajorProduct) {
  GemmDescription d = GemmDescription::dense(3, 5, 7);
  d.lda = 9;
  d.ldb = 6;
  d.ldc = 8;
  ColumnMajorGemm c = toColumnMajor(d);
  EXPECT_EQ(c.m, 5);
  EXPECT_EQ(c.n, 3);
  EXPECT_EQ(c.k, 7);
  EXPECT_FALSE(c.transA);
  EXPECT_FALSE(c.transB);
  // cuBLASLt's A is our B (k x n row-major = n x k column-major), its B our A.
  EXPECT_EQ(c.rowsA, 5);
  EXPECT_EQ(c.colsA, 7);
  EXPECT_EQ(c.lda, 6);
  EXPECT_EQ(c.rowsB, 7);
  EXPECT_EQ(c.colsB, 3);
  EXPECT_EQ(c.ldb, 9);
  EXPECT_EQ(c.ldc, 8);

  GemmDescription t = GemmDescription::dense(3, 5, 7, /*transA=*/true, /*transB=*/false);
  t.batch = 4;
  t.strideA = 100;
  t.strideB = 200;
  t.strideC = 300;
  ColumnMajorGemm ct = toColumnMajor(t);
  EXPECT_FALSE(ct.transA);
  EXPECT_TRUE(ct.transB); // our transposed A is cuBLASLt's transposed B
  EXPECT_EQ(ct.rowsB, 3); // A stored k x m row-major = m x k column-major
  EXPECT_EQ(ct.colsB, 7);
  EXPECT_EQ(ct.ldb, 3);
  EXPECT_EQ(ct.strideA, 200);
  EXPECT_EQ(ct.strideB, 100);
  EXPECT_EQ(ct.strideC, 300);

  ColumnMajorGemm cb = toColumnMajor(GemmDescription::dense(3, 5, 7, false, true));
  EXPECT_TRUE(cb.transA);
  EXPECT_EQ(cb.rowsA, 7); // B stored n x k row-major = k x n column-major
  EXPECT_EQ(cb.colsA, 5);
  EXPECT_EQ(cb.lda, 7);
}

} // namespace
} // namespace mtc::rt::cuda::test

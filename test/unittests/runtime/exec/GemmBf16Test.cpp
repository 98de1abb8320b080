//===- GemmBf16Test.cpp - The bf16 batched matrix product ------------------===//

#include "runtime/exec/Gemm.h"
#include "runtime/support/Safetensors.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

using namespace mtc::rt;

namespace {

/// bf16 storage of `size` values numbered so that every product differs (exact in bf16).
std::vector<uint16_t> numbered(size_t size) {
  std::vector<uint16_t> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = floatToBf16(static_cast<float>((i * 7 + 3) % 23) / 8.0f - 1.0f).bits;
  return values;
}

std::vector<float> numberedF32(size_t size) {
  std::vector<float> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = static_cast<float>((i * 5 + 1) % 17) / 4.0f - 2.0f;
  return values;
}

MemRef3BF16 view(std::vector<uint16_t> &storage, int64_t offset, std::array<int64_t, 3> sizes,
                 std::array<int64_t, 3> strides) {
  return {storage.data(), storage.data(), offset, {sizes[0], sizes[1], sizes[2]},
          {strides[0], strides[1], strides[2]}};
}

MemRef3F32 view(std::vector<float> &storage, int64_t offset, std::array<int64_t, 3> sizes,
                std::array<int64_t, 3> strides) {
  return {storage.data(), storage.data(), offset, {sizes[0], sizes[1], sizes[2]},
          {strides[0], strides[1], strides[2]}};
}

template <typename MemRef> auto at(const MemRef &m, int64_t i, int64_t j, int64_t l) {
  return m.aligned[m.offset + i * m.strides[0] + j * m.strides[1] + l * m.strides[2]];
}

/// Checks c += a x b against a double-precision sum of the bf16 values (a bf16 product is
/// exact in f32, so only the f32 sums' rounding differs), and that c's elements outside
/// the view are untouched.
void expectProduct(MemRef3BF16 a, MemRef3BF16 b, MemRef3F32 c, std::vector<float> &cStorage) {
  std::vector<double> expected(cStorage.begin(), cStorage.end());
  double scale = 1;
  for (int64_t i = 0; i < c.sizes[0]; ++i)
    for (int64_t j = 0; j < c.sizes[1]; ++j)
      for (int64_t n = 0; n < c.sizes[2]; ++n) {
        double sum = 0;
        for (int64_t l = 0; l < a.sizes[2]; ++l) {
          double term = double(bf16ToFloat(BFloat16{at(a, i, j, l)})) *
                        double(bf16ToFloat(BFloat16{at(b, i, l, n)}));
          sum += term;
          scale = std::max(scale, std::abs(term));
        }
        expected[size_t(c.offset + i * c.strides[0] + j * c.strides[1] + n * c.strides[2])] += sum;
      }
  _mlir_ciface_mtc_batch_matmul_bf16(nullptr, &a, &b, &c);
  // f32 sums of k terms: within k units of the largest term's last place (and c's own).
  double bound = 1e-6 * double(a.sizes[2] + 1) * scale;
  for (size_t e = 0; e < cStorage.size(); ++e)
    EXPECT_NEAR(cStorage[e], expected[e], bound * (1 + std::abs(expected[e]))) << "element " << e;
}

} // namespace

TEST(GemmBf16Test, ContiguousBatchesAccumulate) {
  auto a = numbered(2 * 3 * 4), b = numbered(2 * 4 * 5);
  auto c = numberedF32(2 * 3 * 5);
  expectProduct(view(a, 0, {2, 3, 4}, {12, 4, 1}), view(b, 0, {2, 4, 5}, {20, 5, 1}),
                view(c, 0, {2, 3, 5}, {15, 5, 1}), c);
}

TEST(GemmBf16Test, TransposedOperandsPaddingOffsetsAndBatchStrides) {
  // a stored column-major with padding, b transposed, gaps between batches, offsets.
  auto a = numbered(3 + 2 * 40), b = numbered(5 + 2 * 50);
  auto c = numberedF32(7 + 2 * 30);
  expectProduct(view(a, 3, {2, 3, 4}, {40, 1, 8}), view(b, 5, {2, 4, 5}, {50, 1, 9}),
                view(c, 7, {2, 3, 5}, {30, 8, 1}), c);
}

TEST(GemmBf16Test, ResultWithContiguousColumns) {
  auto a = numbered(3 * 6), b = numbered(6 * 4);
  auto c = numberedF32(4 * 3 + 5);
  expectProduct(view(a, 0, {1, 3, 6}, {18, 6, 1}), view(b, 0, {1, 6, 4}, {24, 4, 1}),
                view(c, 2, {1, 3, 4}, {17, 1, 4}), c);
}

TEST(GemmBf16Test, LayoutsNoGemmReadsDirectly) {
  // Neither rows nor columns contiguous in a, and a result with both strides above 1.
  auto a = numbered(2 * 3 * 4 * 2), b = numbered(4 * 5);
  auto c = numberedF32(3 * 5 * 2);
  expectProduct(view(a, 0, {1, 3, 4}, {0, 8, 2}), view(b, 0, {1, 4, 5}, {20, 5, 1}),
                view(c, 0, {1, 3, 5}, {0, 10, 2}), c);
}

TEST(GemmBf16Test, ManyTilesAndABroadcastBatch) {
  // More rows and columns than one tile holds (256 x 256), a shared b (batch stride 0).
  int64_t m = 300, n = 520, k = 24;
  auto a = numbered(size_t(2 * m * k)), b = numbered(size_t(k * n));
  auto c = numberedF32(size_t(2 * m * n));
  expectProduct(view(a, 0, {2, m, k}, {m * k, k, 1}), view(b, 0, {2, k, n}, {0, n, 1}),
                view(c, 0, {2, m, n}, {m * n, n, 1}), c);
}

TEST(GemmBf16Test, EmptyProductsChangeNothing) {
  auto a = numbered(8), b = numbered(8);
  auto c = numberedF32(8);
  std::vector<float> before = c;
  MemRef3BF16 noK[] = {view(a, 0, {1, 2, 0}, {0, 0, 1}), view(b, 0, {1, 0, 2}, {0, 2, 1})};
  MemRef3F32 cView = view(c, 0, {1, 2, 2}, {4, 2, 1});
  _mlir_ciface_mtc_batch_matmul_bf16(nullptr, &noK[0], &noK[1], &cView);
  MemRef3F32 noRows = view(c, 0, {1, 0, 2}, {4, 2, 1});
  MemRef3BF16 aRows = view(a, 0, {1, 0, 2}, {4, 2, 1}), bRows = view(b, 0, {1, 2, 2}, {4, 2, 1});
  _mlir_ciface_mtc_batch_matmul_bf16(nullptr, &aRows, &bRows, &noRows);
  EXPECT_EQ(c, before);
}

// The sums of an element are the same whatever the number of threads: a long k with a
// column-major a, which oneDNN left to size its own work splits among two threads and adds
// in another order (checked by hand on this product).
TEST(GemmBf16Test, ResultsDoNotDependOnThreads) {
  int64_t m = 128, n = 128, k = 8192;
  auto a = numbered(size_t(m * k)), b = numbered(size_t(k * n));
  std::vector<std::vector<float>> results;
  int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> c(size_t(m * n), 0.5f);
    MemRef3BF16 aView = view(a, 0, {1, m, k}, {m * k, 1, m});
    MemRef3BF16 bView = view(b, 0, {1, k, n}, {k * n, n, 1});
    MemRef3F32 cView = view(c, 0, {1, m, n}, {m * n, n, 1});
    _mlir_ciface_mtc_batch_matmul_bf16(nullptr, &aView, &bView, &cView);
    results.push_back(c);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4));
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), results[0].size() * 4));
}

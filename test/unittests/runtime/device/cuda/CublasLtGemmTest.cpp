//===- CublasLtGemmTest.cpp - cuBLASLt GEMMs against a CPU reference -----===//
//
// On a GPU: row-major products of several shapes, with every transpose, padded leading
// dimensions, batches, alpha/beta and the epilogues, compared with a double-precision CPU
// reference. fp32 with TF32 off must agree within 1e-5 of the magnitude of the products'
// terms (TF32's 10-bit mantissa would miss that by two orders). Without a GPU: creating the
// handle is an error value.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/CublasLtGemm.h"

#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/Stream.h"
#include "runtime/support/Safetensors.h"

#include "CudaTestSupport.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

namespace mtc::rt::cuda::test {
namespace {

TEST(CublasLtGemm, WithoutADeviceCreationIsAnErrorValue) {
  if (haveCudaDevice())
    GTEST_SKIP() << "a CUDA device is present; this tests the machine without one";
  Expected<CublasLtGemm> gemm = CublasLtGemm::create();
  ASSERT_FALSE(gemm.ok());
  EXPECT_EQ(gemm.error().message().rfind("creating the cuBLASLt handle: CUBLAS_STATUS_", 0), 0u)
      << gemm.error().message();
}

/// Host copies of a product's operands and the reference result.
struct HostGemm {
  std::vector<float> a, b, c, bias;
  std::vector<double> expected, magnitude;         // reference and sum of |terms| per element
  std::vector<double> gradient, gradientMagnitude; // a bias-gradient epilogue's vector
};

double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

HostGemm makeProblem(const GemmDescription &d, float alpha, float beta, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = d.dtype == MTC_BF16 ? bf16ToFloat(floatToBf16(value(rng))) : value(rng);
    return v;
  };
  int64_t rowsA = d.transA ? d.k : d.m, rowsB = d.transB ? d.n : d.k;
  auto extent = [&](int64_t rows, int64_t ld, int64_t stride) {
    return size_t((d.batch - 1) * stride + rows * ld);
  };
  HostGemm h;
  h.a = fill(extent(rowsA, d.lda, d.strideA));
  h.b = fill(extent(rowsB, d.ldb, d.strideB));
  h.c = fill(extent(d.m, d.ldc, d.strideC));
  h.bias = fill(size_t(d.n));
  h.expected.assign(h.c.begin(), h.c.end());
  h.magnitude.assign(h.c.size(), 0.0);
  bool bias = d.epilogue == GemmEpilogue::Bias || d.epilogue == GemmEpilogue::BiasGelu;
  bool gelu = d.epilogue == GemmEpilogue::Gelu || d.epilogue == GemmEpilogue::BiasGelu;
  for (int64_t p = 0; p < d.batch; ++p)
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < d.k; ++l) {
          double x = h.a[p * d.strideA + (d.transA ? l * d.lda + i : i * d.lda + l)];
          double y = h.b[p * d.strideB + (d.transB ? j * d.ldb + l : l * d.ldb + j)];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        size_t at = size_t(p * d.strideC + i * d.ldc + j);
        double r = alpha * sum + beta * double(h.c[at]);
        mag = std::fabs(alpha) * mag + std::fabs(beta * double(h.c[at]));
        if (bias) {
          r += h.bias[j];
          mag += std::fabs(h.bias[j]);
        }
        if (gelu)
          r = geluTanh(r);
        h.expected[at] = r;
        h.magnitude[at] = mag;
      }
  // The bias gradients: the sum over k of op(A) (a row per i) or of op(B) (a column per j).
  if (d.epilogue == GemmEpilogue::BiasGradA || d.epilogue == GemmEpilogue::BiasGradB) {
    bool ofA = d.epilogue == GemmEpilogue::BiasGradA;
    int64_t length = ofA ? d.m : d.n;
    h.gradient.assign(size_t(length), 0.0);
    h.gradientMagnitude.assign(size_t(length), 0.0);
    for (int64_t i = 0; i < length; ++i)
      for (int64_t l = 0; l < d.k; ++l) {
        double x = ofA ? h.a[d.transA ? l * d.lda + i : i * d.lda + l]
                       : h.b[d.transB ? i * d.ldb + l : l * d.ldb + i];
        h.gradient[i] += x;
        h.gradientMagnitude[i] += std::fabs(x);
      }
  }
  return h;
}

class CublasLtGemmOnGpu : public CudaDeviceTest {
protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (IsSkipped())
      return;
    Expected<CublasLtGemm> gemm = CublasLtGemm::create();
    ASSERT_TRUE(gemm.ok()) << gemm.error().message();
    gemm_.emplace(std::move(*gemm));
    Expected<Stream> stream = Stream::create("compute");
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    stream_.emplace(std::move(*stream));
  }

  /// Runs `d` on the GPU and returns the largest |error| / (magnitude + 1e-30) over C's
  /// elements (elements between rows, under padding, must stay untouched).
  double relativeError(const GemmDescription &d, float alpha = 1.0f, float beta = 0.0f,
                       unsigned seed = 1) {
    HostGemm h = makeProblem(d, alpha, beta, seed);
    // bf16 operands travel as their 16 bits (makeProblem made every value a bf16 one).
    bool bf16 = d.dtype == MTC_BF16;
    int64_t elementBytes = bf16 ? 2 : 4;
    int64_t gradientLength = std::max(d.m, d.n);
    int64_t bytes =
        int64_t(h.a.size() + h.b.size() + h.c.size() + h.bias.size() + gradientLength) * 4 + 8192;
    Expected<DeviceArena> arena = DeviceArena::create(device(), bytes);
    EXPECT_TRUE(arena.ok()) << arena.error().message();
    if (!arena)
      return INFINITY;
    auto upload = [&](const std::vector<float> &values) -> void * {
      void *p = *arena->allocate(int64_t(values.size()) * elementBytes);
      std::vector<uint16_t> halves;
      for (float v : values)
        halves.push_back(floatToBf16(v).bits);
      const void *from = bf16 ? static_cast<const void *>(halves.data()) : values.data();
      EXPECT_EQ(cudaMemcpy(p, from, values.size() * elementBytes, cudaMemcpyHostToDevice),
                cudaSuccess);
      return p;
    };
    auto download = [&](const void *p, size_t count) {
      std::vector<float> values(count);
      std::vector<uint16_t> halves(count);
      void *to = bf16 ? static_cast<void *>(halves.data()) : values.data();
      EXPECT_EQ(cudaMemcpy(to, p, count * elementBytes, cudaMemcpyDeviceToHost), cudaSuccess);
      if (bf16)
        for (size_t i = 0; i < count; ++i)
          values[i] = bf16ToFloat(BFloat16{halves[i]});
      return values;
    };
    GemmOperands ops;
    ops.a = upload(h.a);
    ops.b = upload(h.b);
    ops.c = upload(h.c);
    ops.bias = upload(h.bias);
    ops.biasGradient = *arena->allocate(gradientLength * elementBytes);
    ops.alpha = alpha;
    ops.beta = beta;
    Error run = gemm_->run(d, ops, *stream_);
    EXPECT_TRUE(run.ok()) << run.message();
    if (!run.ok())
      return INFINITY;
    EXPECT_TRUE(stream_->synchronize().ok());
    std::vector<float> back = download(ops.c, h.c.size());
    double worst = 0;
    for (size_t i = 0; i < back.size(); ++i)
      worst = std::max(worst, std::fabs(back[i] - h.expected[i]) / (h.magnitude[i] + 1e-30));
    if (!h.gradient.empty()) {
      std::vector<float> grad = download(ops.biasGradient, h.gradient.size());
      for (size_t i = 0; i < grad.size(); ++i)
        worst =
            std::max(worst, std::fabs(grad[i] - h.gradient[i]) / (h.gradientMagnitude[i] + 1e-30));
    }
    return worst;
  }

  std::optional<CublasLtGemm> gemm_;
  std::optional<Stream> stream_;
};

TEST_F(CublasLtGemmOnGpu, Fp32RowMajorWithEveryTransposeWithin1e5) {
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {17, 33, 65}, {64, 128, 96}, {128, 256, 1024}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        GemmDescription d = GemmDescription::dense(m, n, k, ta, tb);
        EXPECT_LE(relativeError(d), 1e-5)
            << m << "x" << n << "x" << k << " transA " << ta << " transB " << tb;
      }
}

TEST_F(CublasLtGemmOnGpu, PaddedLeadingDimensionsBatchesAlphaBeta) {
  GemmDescription d = GemmDescription::dense(20, 24, 36, /*transA=*/true, /*transB=*/false);
  d.lda += 3;
  d.ldb += 5;
  d.ldc += 7;
  EXPECT_LE(relativeError(d, 0.5f, 1.0f), 1e-5);

  GemmDescription batched = GemmDescription::dense(16, 48, 32, false, true);
  batched.batch = 3;
  batched.strideA += 64;
  batched.strideB += 32;
  batched.strideC += 16;
  EXPECT_LE(relativeError(batched, 1.0f, 0.25f, 2), 1e-5);

  GemmDescription shared = GemmDescription::dense(8, 16, 32);
  shared.batch = 4;
  shared.strideB = 0; // one weight matrix for the whole batch
  EXPECT_LE(relativeError(shared, 1.0f, 0.0f, 3), 1e-5);
}

TEST_F(CublasLtGemmOnGpu, BiasAndGeluEpilogues) {
  for (GemmEpilogue e : {GemmEpilogue::Bias, GemmEpilogue::Gelu, GemmEpilogue::BiasGelu}) {
    GemmDescription d = GemmDescription::dense(32, 64, 48);
    d.epilogue = e;
    EXPECT_LE(relativeError(d), 1e-5) << "epilogue " << int(e);
  }
}

// A linear layer's weight and bias gradients in one call: with x [tokens, in] and
// dy [tokens, out], dW [in, out] = x^T dy and db = the sum of dy over tokens (BiasGradB);
// for a weight stored [out, in], dW = dy^T x and db the sum of op(A) (BiasGradA).
TEST_F(CublasLtGemmOnGpu, BiasGradientEpilogues) {
  GemmDescription inOut = GemmDescription::dense(48, 64, 96, /*transA=*/true, false);
  inOut.epilogue = GemmEpilogue::BiasGradB;
  EXPECT_LE(relativeError(inOut), 1e-5);
  GemmDescription outIn = GemmDescription::dense(64, 48, 96, /*transA=*/true, false);
  outIn.epilogue = GemmEpilogue::BiasGradA;
  EXPECT_LE(relativeError(outIn), 1e-5);
}

// bf16 operands and result, fp32 accumulation: rounding the result to bf16 (8 significant
// bits) costs up to 2^-8 of it; one unit in the last place (2^-7) is allowed, for kernels
// that round partial sums.
TEST_F(CublasLtGemmOnGpu, Bf16WithinItsRounding) {
  for (bool ta : {false, true}) {
    GemmDescription d = GemmDescription::dense(64, 96, 128, ta, !ta, MTC_BF16);
    EXPECT_LE(relativeError(d), 7.9e-3) << "transA " << ta;
  }
  GemmDescription bias = GemmDescription::dense(32, 64, 48, false, false, MTC_BF16);
  bias.epilogue = GemmEpilogue::Bias;
  EXPECT_LE(relativeError(bias), 7.9e-3);
}

TEST_F(CublasLtGemmOnGpu, Tf32WhenAllowed) {
  GemmDescription d = GemmDescription::dense(128, 128, 512);
  d.allowTf32 = true;
  // TF32 keeps 10 mantissa bits: about 1e-3 relative, far from fp32's 1e-5.
  EXPECT_LE(relativeError(d), 5e-3);
}

TEST_F(CublasLtGemmOnGpu, EqualDescriptionsReuseTheHeuristicsChoice) {
  GemmDescription d = GemmDescription::dense(64, 64, 64);
  EXPECT_LE(relativeError(d), 1e-5);
  EXPECT_LE(relativeError(d, 1.0f, 0.0f, 7), 1e-5);
  EXPECT_EQ(gemm_->cachedProducts(), 1u);
  EXPECT_EQ(gemm_->cacheHits(), 1);
  GemmDescription other = d;
  other.transB = true;
  EXPECT_LE(relativeError(other), 1e-5);
  EXPECT_EQ(gemm_->cachedProducts(), 2u);
  EXPECT_EQ(gemm_->cacheHits(), 1);
}

TEST_F(CublasLtGemmOnGpu, BadCallsAreErrors) {
  GemmDescription d = GemmDescription::dense(4, 4, 4);
  GemmOperands none;
  Error missing = gemm_->run(d, none, *stream_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "GEMM 4x4x4: A, B and C must be device pointers (one is null)");

  Expected<DeviceArena> arena = DeviceArena::create(device(), 4096);
  ASSERT_TRUE(arena.ok());
  GemmOperands ops;
  ops.a = *arena->allocate(64);
  ops.b = *arena->allocate(64);
  ops.c = *arena->allocate(64);
  d.epilogue = GemmEpilogue::Bias;
  Error noBias = gemm_->run(d, ops, *stream_);
  ASSERT_FALSE(noBias.ok());
  EXPECT_EQ(noBias.message(), "GEMM 4x4x4: the bias epilogue needs a bias vector");

  d.epilogue = GemmEpilogue::BiasGradB;
  Error noGradient = gemm_->run(d, ops, *stream_);
  ASSERT_FALSE(noGradient.ok());
  EXPECT_EQ(noGradient.message(), "GEMM 4x4x4: the bias-gradient epilogue needs a vector to write");

  d = GemmDescription::dense(4, 4, 4);
  d.ldc = 2;
  EXPECT_FALSE(gemm_->run(d, ops, *stream_).ok());
  EXPECT_EQ(gemm_->cachedProducts(), 0u);
}

} // namespace
} // namespace mtc::rt::cuda::test

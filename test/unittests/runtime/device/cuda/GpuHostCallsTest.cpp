//===- GpuHostCallsTest.cpp - The CUDA host code's imports ----------------===//
//
// Without a GPU: the choice of the plan's binary, the GEMM descriptions of the descriptors
// the host code passes, and the imports' failure handling (a call that already failed does
// nothing; a workspace larger than the plan's is an error, not an allocation). On a GPU
// (skipped without one, never run so far): vector_add.ptx launched by name through
// mtc_gpu_launch with 64-bit argument words, and a batched product accumulated through
// _mlir_ciface_mtc_gpu_batch_matmul_f32 against the host's, and a bf16 product accumulated
// into f32 through _mlir_ciface_mtc_gpu_batch_matmul_bf16.

#include "runtime/device/cuda/GpuHostCalls.h"
#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/Stream.h"

#include "CudaTestSupport.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace mtc::rt::cuda::test {
namespace {

CudaKernelsInfo kernelsFor(std::vector<CudaBinary> binaries) {
  CudaKernelsInfo k;
  k.blockSize = 256;
  k.binaries = std::move(binaries);
  return k;
}

TEST(SelectBinary, CubinOfTheChipElseNewestOlderPtx) {
  CudaKernelsInfo k = kernelsFor({{"sm_80", "kernels/sm_80.ptx", "kernels/sm_80.cubin"},
                                  {"sm_90", "kernels/sm_90.ptx", "kernels/sm_90.cubin"}});
  EXPECT_EQ((*selectBinary(k, 9, 0))->chip, "sm_90");
  EXPECT_EQ((*selectBinary(k, 8, 0))->chip, "sm_80");
  // sm_86 runs sm_80's PTX (the driver compiles it), sm_100 sm_90's.
  EXPECT_EQ((*selectBinary(k, 8, 6))->chip, "sm_80");
  EXPECT_EQ((*selectBinary(k, 10, 0))->chip, "sm_90");
  Expected<const CudaBinary *> old = selectBinary(k, 7, 5);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().message(), "the plan's CUDA kernels are for sm_80, sm_90, none of which "
                                   "runs on an sm_75 device (recompile with --cuda-arch=sm_75)");
}

MtcMemRef3F32 memref(float *data, int64_t b, int64_t r, int64_t c, int64_t sb, int64_t sr,
                     int64_t sc) {
  return MtcMemRef3F32{data, data, 0, {b, r, c}, {sb, sr, sc}};
}

/// A copy of `host` in `arena` (null when it does not fit or the copy fails).
template <class T> T *onDevice(DeviceArena &arena, const std::vector<T> &host) {
  Expected<void *> p = arena.allocate(int64_t(host.size() * sizeof(T)));
  if (!p || cudaMemcpy(*p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) !=
                cudaSuccess)
    return nullptr;
  return static_cast<T *>(*p);
}

TEST(DescribeBatchMatmul, ContiguousAndTransposedOperands) {
  float x = 0;
  // [2, 3, 4] x [2, 4, 5] -> [2, 3, 5], all row-major.
  MtcMemRef3F32 a = memref(&x, 2, 3, 4, 12, 4, 1), b = memref(&x, 2, 4, 5, 20, 5, 1),
                c = memref(&x, 2, 3, 5, 15, 5, 1);
  Expected<GemmDescription> d = describeBatchMatmul(a, b, c);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->m, 3);
  EXPECT_EQ(d->n, 5);
  EXPECT_EQ(d->k, 4);
  EXPECT_FALSE(d->transA);
  EXPECT_FALSE(d->transB);
  EXPECT_EQ(d->lda, 4);
  EXPECT_EQ(d->ldb, 5);
  EXPECT_EQ(d->ldc, 5);
  EXPECT_EQ(d->batch, 2);
  EXPECT_EQ(d->strideA, 12);
  EXPECT_EQ(d->strideB, 20);
  EXPECT_EQ(d->strideC, 15);
  EXPECT_FALSE(d->allowTf32);

  // B read transposed in place: a [5, 4] row-major matrix seen as [4, 5].
  MtcMemRef3F32 bt = memref(&x, 2, 4, 5, 20, 1, 4);
  Expected<GemmDescription> t = describeBatchMatmul(a, bt, c);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_TRUE(t->transB);
  EXPECT_EQ(t->ldb, 4);
}

TEST(DescribeBatchMatmul, Bf16OperandsIntoAnF32Result) {
  uint16_t h = 0;
  float x = 0;
  // [2, 3, 4] x [2, 4, 5] -> [2, 3, 5]: bf16 A and B (B read transposed), f32 C.
  MtcMemRef3BF16 a{&h, &h, 0, {2, 3, 4}, {12, 4, 1}}, b{&h, &h, 0, {2, 4, 5}, {20, 1, 4}};
  MtcMemRef3F32 c = memref(&x, 2, 3, 5, 15, 5, 1);
  Expected<GemmDescription> d = describeBatchMatmul(a, b, c);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->dtype, MTC_BF16);
  EXPECT_TRUE(d->f32Output);
  EXPECT_EQ(d->outputType(), MTC_F32);
  EXPECT_TRUE(d->transB);
  EXPECT_EQ(d->ldb, 4);
  EXPECT_FALSE(d->allowTf32);
  // The f32 product keeps its output type.
  MtcMemRef3F32 af = memref(&x, 2, 3, 4, 12, 4, 1), bf = memref(&x, 2, 4, 5, 20, 5, 1);
  Expected<GemmDescription> f = describeBatchMatmul(af, bf, c);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_FALSE(f->f32Output);
  EXPECT_EQ(f->outputType(), MTC_F32);
}

TEST(DescribeBatchMatmul, LayoutsCublasCannotRead) {
  float x = 0;
  MtcMemRef3F32 a = memref(&x, 1, 3, 4, 12, 4, 1), b = memref(&x, 1, 4, 5, 20, 5, 1);
  // C with contiguous columns.
  MtcMemRef3F32 ct = memref(&x, 1, 3, 5, 15, 1, 3);
  Expected<GemmDescription> d = describeBatchMatmul(a, b, ct);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("C's rows must be contiguous"), std::string::npos)
      << d.error().message();
  // Shapes that do not chain.
  MtcMemRef3F32 wrong = memref(&x, 1, 5, 5, 25, 5, 1);
  Expected<GemmDescription> e = describeBatchMatmul(a, wrong, memref(&x, 1, 3, 5, 15, 5, 1));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("do not match"), std::string::npos) << e.error().message();
}

TEST(GpuHostImports, AFailedCallDoesNothingMore) {
  GpuCall call;
  call.failure = Error::failure("the first failure");
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  context.gpu = &call;
  uint64_t words[1] = {0};
  // No kernels, stream or GEMM engine: reaching them would crash.
  mtc_gpu_launch(&context, "missing", 1, 1, 1, 1, 1, 1, words, 1);
  float x = 0;
  MtcMemRef3F32 m = memref(&x, 1, 1, 1, 1, 1, 1);
  _mlir_ciface_mtc_gpu_batch_matmul_f32(&context, &m, &m, &m);
  uint16_t h = 0;
  MtcMemRef3BF16 mh{&h, &h, 0, {1, 1, 1}, {1, 1, 1}};
  _mlir_ciface_mtc_gpu_batch_matmul_bf16(&context, &mh, &mh, &m);
  EXPECT_EQ(call.failure.message(), "the first failure");
}

TEST(GpuHostImports, WorkspaceLargerThanThePlansIsAnError) {
  GpuCall call;
  std::vector<char> workspace(64);
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, workspace.data(), 64);
  context.gpu = &call;
  EXPECT_EQ(mtc_gpu_workspace(&context, 64), workspace.data());
  EXPECT_TRUE(call.failure.ok());
  mtc_gpu_workspace(&context, 65);
  EXPECT_EQ(call.failure.message(),
            "the CUDA host code asks for a workspace of 65 bytes, and the plan's is 64");
}

class GpuHostCallsOnGpu : public CudaDeviceTest {};

TEST_F(GpuHostCallsOnGpu, LaunchesByNameWithArgumentWords) {
  std::filesystem::path ptx = MTC_TEST_VECTOR_ADD_PTX;
  Plan plan;
  plan.dir = ptx.parent_path();
  plan.cudaKernels = kernelsFor({{"sm_75", ptx.filename().string(), std::nullopt}});
  Expected<PlanKernels> kernels = PlanKernels::load(plan, device());
  ASSERT_TRUE(kernels.ok()) << kernels.error().message();
  Expected<RankStreams> streams = RankStreams::create();
  ASSERT_TRUE(streams.ok()) << streams.error().message();
  constexpr int n = 1000;
  Expected<DeviceArena> arena = DeviceArena::create(device(), 3 * n * sizeof(float) + 1024);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i);
    b[i] = 0.5f * float(i);
  }
  void *da = *arena->allocate(n * sizeof(float)), *db = *arena->allocate(n * sizeof(float)),
       *dc = *arena->allocate(n * sizeof(float));
  ASSERT_EQ(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  GpuCall call;
  call.kernels = &*kernels;
  call.stream = &streams->compute;
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  context.gpu = &call;
  // The words as the host code builds them: addresses, then the u32 count zero-extended.
  uint64_t words[4] = {reinterpret_cast<uint64_t>(da), reinterpret_cast<uint64_t>(db),
                       reinterpret_cast<uint64_t>(dc), uint64_t(n)};
  mtc_gpu_launch(&context, "vector_add", (n + 255) / 256, 1, 1, 256, 1, 1, words, 4);
  ASSERT_TRUE(call.failure.ok()) << call.failure.message();
  ASSERT_TRUE(streams->compute.synchronize().ok());
  ASSERT_EQ(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(c[i], a[i] + b[i]) << i;

  mtc_gpu_launch(&context, "no_such_kernel", 1, 1, 1, 1, 1, 1, words, 4);
  EXPECT_NE(call.failure.message().find("no_such_kernel"), std::string::npos)
      << call.failure.message();
}

TEST_F(GpuHostCallsOnGpu, BatchMatmulAccumulates) {
  Expected<RankStreams> streams = RankStreams::create();
  ASSERT_TRUE(streams.ok()) << streams.error().message();
  Expected<CublasLtGemm> gemm = CublasLtGemm::create();
  ASSERT_TRUE(gemm.ok()) << gemm.error().message();
  const int64_t batch = 2, m = 3, k = 4, n = 5;
  std::vector<float> a(batch * m * k), b(batch * k * n), c(batch * m * n, 1.0f);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(i % 7) - 3.0f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float(i % 5) * 0.25f;
  Expected<DeviceArena> arena = DeviceArena::create(device(), 4096);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  float *da = onDevice(*arena, a), *db = onDevice(*arena, b), *dc = onDevice(*arena, c);
  ASSERT_TRUE(da && db && dc);
  GpuCall call;
  call.stream = &streams->compute;
  call.gemm = &*gemm;
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  context.gpu = &call;
  MtcMemRef3F32 ma = memref(da, batch, m, k, m * k, k, 1), mb = memref(db, batch, k, n, k * n, n, 1),
                mc = memref(dc, batch, m, n, m * n, n, 1);
  _mlir_ciface_mtc_gpu_batch_matmul_f32(&context, &ma, &mb, &mc);
  ASSERT_TRUE(call.failure.ok()) << call.failure.message();
  ASSERT_TRUE(streams->compute.synchronize().ok());
  std::vector<float> result(c.size());
  ASSERT_EQ(cudaMemcpy(result.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float expected = 1.0f;
        for (int64_t l = 0; l < k; ++l)
          expected += a[p * m * k + i * k + l] * b[p * k * n + l * n + j];
        EXPECT_NEAR(result[p * m * n + i * n + j], expected, 1e-5f);
      }
}

TEST_F(GpuHostCallsOnGpu, Bf16BatchMatmulAccumulatesIntoF32) {
  Expected<RankStreams> streams = RankStreams::create();
  ASSERT_TRUE(streams.ok()) << streams.error().message();
  Expected<CublasLtGemm> gemm = CublasLtGemm::create();
  ASSERT_TRUE(gemm.ok()) << gemm.error().message();
  const int64_t m = 3, k = 4, n = 5;
  // Values bf16 holds exactly (multiples of 1/4 below 8): the f32 sums are exact too.
  auto bf16Bits = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return static_cast<uint16_t>(bits >> 16);
  };
  std::vector<float> a(m * k), b(k * n), c(m * n, 0.5f);
  std::vector<uint16_t> ah(a.size()), bh(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ah[i] = bf16Bits(a[i] = float(i % 7) - 3.0f);
  for (size_t i = 0; i < b.size(); ++i)
    bh[i] = bf16Bits(b[i] = float(i % 5) * 0.25f);
  Expected<DeviceArena> arena = DeviceArena::create(device(), 4096);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  uint16_t *da = onDevice(*arena, ah), *db = onDevice(*arena, bh);
  float *dc = onDevice(*arena, c);
  ASSERT_TRUE(da && db && dc);
  GpuCall call;
  call.stream = &streams->compute;
  call.gemm = &*gemm;
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  context.gpu = &call;
  MtcMemRef3BF16 ma{da, da, 0, {1, m, k}, {m * k, k, 1}}, mb{db, db, 0, {1, k, n}, {k * n, n, 1}};
  MtcMemRef3F32 mc = memref(dc, 1, m, n, m * n, n, 1);
  _mlir_ciface_mtc_gpu_batch_matmul_bf16(&context, &ma, &mb, &mc);
  ASSERT_TRUE(call.failure.ok()) << call.failure.message();
  ASSERT_TRUE(streams->compute.synchronize().ok());
  std::vector<float> result(c.size());
  ASSERT_EQ(cudaMemcpy(result.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float expected = 0.5f;
      for (int64_t l = 0; l < k; ++l)
        expected += a[i * k + l] * b[l * n + j];
      EXPECT_EQ(result[i * n + j], expected) << i << ", " << j;
    }
}

} // namespace
} // namespace mtc::rt::cuda::test

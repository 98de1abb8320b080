//===- KernelModuleTest.cpp - Loading GPU code and launching its kernels -===//
//
// vector_add.ptx (hand-written, sm_75 and newer) is loaded as PTX and, where ptxas made them
// at build time, as cubins for sm_80 and sm_90.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/KernelModule.h"

#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/Stream.h"

#include "CudaTestSupport.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace mtc::rt::cuda::test {
namespace {

std::vector<std::byte> bytesOf(std::string_view text) {
  auto *p = reinterpret_cast<const std::byte *>(text.data());
  return std::vector<std::byte>(p, p + text.size());
}

std::vector<std::byte> readFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytesOf(text);
}

TEST(KernelImage, KindFromTheFirstBytes) {
  EXPECT_EQ(*classifyKernelImage(readFile(MTC_TEST_VECTOR_ADD_PTX)), KernelImageKind::Ptx);
  EXPECT_EQ(*classifyKernelImage(bytesOf(std::string_view("\x7f"
                                                          "ELF\x02\x01",
                                                          6))),
            KernelImageKind::Cubin);
  EXPECT_EQ(*classifyKernelImage(bytesOf(std::string_view("\x50\xed\x55\xba\x01\x00", 6))),
            KernelImageKind::Fatbin);
}

TEST(KernelImage, NeitherPtxNorBinaryIsAnError) {
  Expected<KernelImageKind> empty = classifyKernelImage({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message(), "the GPU code image is empty");
  Expected<KernelImageKind> junk = classifyKernelImage(bytesOf("hello, world"));
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().message(),
            "the GPU code image (12 bytes) is neither PTX (no .version directive), a cubin nor "
            "a fatbin");
  // Rejected before anything reaches the driver, so the same error with or without a GPU.
  Expected<KernelModule> module = KernelModule::load(bytesOf("hello, world"), "junk.bin");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.error().message().rfind("loading junk.bin: the GPU code image", 0), 0u);
}

TEST(LaunchShape, LimitsEveryDeviceShares) {
  LaunchShape ok{{4096, 1, 1}, {256, 1, 1}, 0};
  EXPECT_TRUE(checkLaunchShape(ok).ok());
  LaunchShape zero{{0, 1, 1}, {256, 1, 1}, 0};
  Error e = checkLaunchShape(zero);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "launch: grid and block sizes must be at least 1 (x: grid 0, block 256)");
  EXPECT_FALSE(checkLaunchShape({{1, 1, 1}, {1025, 1, 1}, 0}).ok());
  EXPECT_FALSE(checkLaunchShape({{1, 1, 1}, {32, 32, 2}, 0}).ok()); // 2048 threads
  EXPECT_FALSE(checkLaunchShape({{1, 1, 1}, {1, 1, 65}, 0}).ok());
  EXPECT_TRUE(checkLaunchShape({{1u << 31 >> 1, 65535, 65535}, {32, 32, 1}, 0}).ok());
  EXPECT_FALSE(checkLaunchShape({{1, 65536, 1}, {1, 1, 1}, 0}).ok());
}

TEST(KernelModule, WithoutADeviceLoadingIsAnErrorValue) {
  if (haveCudaDevice())
    GTEST_SKIP() << "a CUDA device is present; this tests the machine without one";
  Expected<KernelModule> module =
      KernelModule::load(readFile(MTC_TEST_VECTOR_ADD_PTX), "vector_add.ptx");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.error().message().rfind("loading vector_add.ptx (PTX, ", 0), 0u)
      << module.error().message();
  EXPECT_NE(module.error().message().find("cudaError"), std::string::npos);
}

class KernelModuleOnGpu : public CudaDeviceTest {
protected:
  // c = a + b over n elements, checked element by element.
  void expectVectorAdd(const KernelModule &module) {
    Expected<Kernel> kernel = module.kernel("vector_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().message();
    constexpr uint32_t n = 1000;
    Expected<DeviceArena> arena = DeviceArena::create(device(), 3 * 4096);
    Expected<Stream> stream = Stream::create("compute");
    ASSERT_TRUE(arena.ok() && stream.ok());
    void *a = *arena->allocate(n * 4), *b = *arena->allocate(n * 4), *c = *arena->allocate(n * 4);
    std::vector<float> ha(n), hb(n), hc(n, -1.0f);
    for (uint32_t i = 0; i < n; ++i) {
      ha[i] = 0.5f * float(i);
      hb[i] = 1000.0f - float(i);
    }
    ASSERT_EQ(cudaMemcpy(a, ha.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b, hb.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    uint32_t count = n;
    void *args[] = {&a, &b, &c, &count};
    LaunchShape shape{{(n + 127) / 128, 1, 1}, {128, 1, 1}, 0};
    ASSERT_TRUE(kernel->launch(shape, *stream, args).ok());
    ASSERT_TRUE(stream->synchronize().ok());
    ASSERT_EQ(cudaMemcpy(hc.data(), c, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(hc[i], ha[i] + hb[i]) << "element " << i;

    LaunchShape bad{{1, 1, 1}, {2048, 1, 1}, 0};
    Error e = kernel->launch(bad, *stream, args);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.message().rfind("launching kernel 'vector_add': launch: block 2048x1x1", 0), 0u);
  }
};

TEST_F(KernelModuleOnGpu, PtxLoadsLaunchesAndNamesAMissingKernel) {
  Expected<KernelModule> module =
      KernelModule::load(readFile(MTC_TEST_VECTOR_ADD_PTX), "vector_add.ptx");
  ASSERT_TRUE(module.ok()) << module.error().message();
  EXPECT_EQ(module->kind(), KernelImageKind::Ptx);
  EXPECT_EQ(module->kernelCount(), 1u);
  expectVectorAdd(*module);
  Expected<Kernel> missing = module->kernel("vector_sub");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("kernel 'vector_sub'"), std::string::npos)
      << missing.error().message();
  EXPECT_NE(missing.error().message().find("vector_add.ptx"), std::string::npos);
}

TEST_F(KernelModuleOnGpu, BrokenPtxIsAnError) {
  Expected<KernelModule> module = KernelModule::load(
      bytesOf(".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry broken() {\n"
              "  this is not PTX;\n}\n"),
      "broken.ptx");
  // With lazy loading the driver may compile the kernel only when it is first looked up.
  if (module.ok()) {
    Expected<Kernel> kernel = module->kernel("broken");
    ASSERT_FALSE(kernel.ok());
    EXPECT_NE(kernel.error().message().find("'broken'"), std::string::npos);
    return;
  }
  EXPECT_NE(module.error().message().find("broken.ptx"), std::string::npos)
      << module.error().message();
  EXPECT_NE(module.error().message().find("cudaError"), std::string::npos);
}

TEST_F(KernelModuleOnGpu, CubinForTheDeviceLoadsAndLaunches) {
  std::filesystem::path cubin;
  if (device().computeMajor() == 8)
    cubin = MTC_TEST_VECTOR_ADD_CUBIN_SM80;
  else if (device().computeMajor() == 9 && device().computeMinor() == 0)
    cubin = MTC_TEST_VECTOR_ADD_CUBIN_SM90;
  if (cubin.empty() || !std::filesystem::exists(cubin))
    GTEST_SKIP() << "no cubin built for " << device().describe();
  Expected<KernelModule> module = KernelModule::load(readFile(cubin), cubin.filename().string());
  ASSERT_TRUE(module.ok()) << module.error().message();
  EXPECT_EQ(module->kind(), KernelImageKind::Cubin);
  expectVectorAdd(*module);
}

} // namespace
} // namespace mtc::rt::cuda::test

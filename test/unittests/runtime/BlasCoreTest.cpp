//===- BlasCoreTest.cpp - Which OpenBLAS kernels this CPU should run ------===//

#include "runtime/support/BlasCore.h"

#include <gtest/gtest.h>

using namespace mtc::rt;

namespace {

CpuFeatures avx512() {
  CpuFeatures cpu;
  cpu.avx512f = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = true;
  cpu.avx2 = cpu.fma = true;
  return cpu;
}

} // namespace

TEST(BlasCoreTest, TheFallbackOnANewerCpuGetsTheKernelsItsFeaturesAllow) {
  EXPECT_EQ(fallbackBlasCore("Prescott", avx512()), "SkylakeX");
  // OpenBLAS's spellings vary between its versions' functions.
  EXPECT_EQ(fallbackBlasCore("prescott", avx512()), "SkylakeX");
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = true;
  EXPECT_EQ(fallbackBlasCore("Prescott", avx2), "Haswell");
  // AVX512 without one of the extensions SkylakeX's kernels use: the AVX2 kernels.
  CpuFeatures partial = avx512();
  partial.avx512bw = false;
  EXPECT_EQ(fallbackBlasCore("Prescott", partial), "Haswell");
}

TEST(BlasCoreTest, ARecognisedCpuOrAnOldOneKeepsOpenBlassChoice) {
  EXPECT_EQ(fallbackBlasCore("SkylakeX", avx512()), std::nullopt);
  EXPECT_EQ(fallbackBlasCore("Zen", avx512()), std::nullopt);
  EXPECT_EQ(fallbackBlasCore("Prescottish", avx512()), std::nullopt);
  EXPECT_EQ(fallbackBlasCore("", avx512()), std::nullopt);
  CpuFeatures sse;
  EXPECT_EQ(fallbackBlasCore("Prescott", sse), std::nullopt);
  CpuFeatures avx2WithoutFma;
  avx2WithoutFma.avx2 = true;
  EXPECT_EQ(fallbackBlasCore("Prescott", avx2WithoutFma), std::nullopt);
}

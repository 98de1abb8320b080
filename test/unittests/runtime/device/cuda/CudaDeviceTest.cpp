//===- CudaDeviceTest.cpp - Picking and describing a rank's device -------===//

#include "runtime/device/cuda/CudaDevice.h"

#include "CudaTestSupport.h"

#include <gtest/gtest.h>

namespace mtc::rt::cuda::test {
namespace {

TEST(DeviceOrdinal, OneDevicePerProcessOrOnePerLocalRank) {
  // The launcher gave each process its own device: every local rank uses device 0.
  EXPECT_EQ(*deviceOrdinalForLocalRank(0, 1), 0);
  EXPECT_EQ(*deviceOrdinalForLocalRank(5, 1), 0);
  // All devices visible: local rank r uses device r.
  EXPECT_EQ(*deviceOrdinalForLocalRank(0, 8), 0);
  EXPECT_EQ(*deviceOrdinalForLocalRank(7, 8), 7);
}

TEST(DeviceOrdinal, MoreRanksThanDevicesIsAnError) {
  Expected<int> ordinal = deviceOrdinalForLocalRank(2, 2);
  ASSERT_FALSE(ordinal.ok());
  EXPECT_EQ(ordinal.error().message(),
            "local rank 2 has no CUDA device of its own: 2 devices are visible (run at most "
            "one rank per GPU)");
  EXPECT_FALSE(deviceOrdinalForLocalRank(-1, 4).ok());
  Expected<int> none = deviceOrdinalForLocalRank(0, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message().rfind("no CUDA device", 0), 0u);
}

using CudaDeviceProperties = CudaDeviceTest;

TEST(DeviceOrdinal, ALauncherNeedsAGpuPerLocalRank) {
  // mtrun --nodes starts its ranks on this host, each seeing every device.
  EXPECT_TRUE(checkDevicesForLocalRanks(1, 1).ok());
  EXPECT_TRUE(checkDevicesForLocalRanks(2, 8).ok());
  EXPECT_TRUE(checkDevicesForLocalRanks(8, 8).ok());
  Error two = checkDevicesForLocalRanks(2, 1);
  EXPECT_EQ(two.message(), "2 ranks on this host need a GPU each, and 1 CUDA device is visible "
                           "(run at most one rank per GPU)");
  EXPECT_FALSE(checkDevicesForLocalRanks(5, 4).ok());
  Error none = checkDevicesForLocalRanks(2, 0);
  EXPECT_EQ(none.message().rfind("no CUDA device", 0), 0u) << none.message();
}

TEST_F(CudaDeviceProperties, ReportsWhatTheDeviceIs) {
  EXPECT_EQ(device().ordinal(), 0);
  EXPECT_FALSE(device().name().empty());
  EXPECT_GE(device().computeMajor(), 7); // CUDA 13 supports sm_75 and newer
  EXPECT_GT(device().multiprocessors(), 0);
  EXPECT_GT(device().totalMemoryBytes(), int64_t(1) << 30);
  EXPECT_NE(
      device().describe().find(concat("sm_", device().computeMajor(), device().computeMinor())),
      std::string::npos)
      << device().describe();
  Expected<DeviceMemory> memory = device().memory();
  ASSERT_TRUE(memory.ok()) << memory.error().message();
  EXPECT_GT(memory->freeBytes, 0);
  EXPECT_LE(memory->freeBytes, memory->totalBytes);
  EXPECT_LE(memory->totalBytes, device().totalMemoryBytes());
}

} // namespace
} // namespace mtc::rt::cuda::test

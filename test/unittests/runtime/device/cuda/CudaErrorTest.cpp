//===- CudaErrorTest.cpp - CUDA statuses as Error values, with and without a device -===//

#include "runtime/device/cuda/CudaError.h"
#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/Stream.h"

#include "CudaTestSupport.h"

#include <cublasLt.h>
#include <gtest/gtest.h>

namespace mtc::rt::cuda::test {
namespace {

TEST(CudaError, SuccessIsSuccess) {
  EXPECT_TRUE(cudaStatus(cudaSuccess, "anything").ok());
  EXPECT_TRUE(cublasStatus(CUBLAS_STATUS_SUCCESS, "anything").ok());
}

TEST(CudaError, NamesTheStatusAndWhatWasDone) {
  Error e = cudaStatus(cudaErrorMemoryAllocation, "allocating the arena");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message().rfind("allocating the arena: cudaErrorMemoryAllocation (", 0), 0u)
      << e.message();
  Error c = cublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "running a GEMM");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message().rfind("running a GEMM: CUBLAS_STATUS_NOT_SUPPORTED (", 0), 0u)
      << c.message();
}

TEST(CudaError, NoDeviceStatuses) {
  EXPECT_TRUE(meansNoDevice(cudaErrorNoDevice));
  EXPECT_TRUE(meansNoDevice(cudaErrorInsufficientDriver));
  EXPECT_FALSE(meansNoDevice(cudaErrorMemoryAllocation));
  EXPECT_FALSE(meansNoDevice(cudaErrorInvalidValue));
}

// Where there is no usable device (no driver, as on the development machine, or no GPU),
// every entry point answers with an Error value naming the CUDA status, not a crash.
TEST(CudaError, WithoutADeviceEveryEntryPointIsAnErrorValue) {
  if (haveCudaDevice())
    GTEST_SKIP() << "a CUDA device is present; this tests the machine without one";
  Expected<int> count = visibleDeviceCount();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.error().message().rfind("no CUDA device: cudaGetDeviceCount: cudaError", 0), 0u)
      << count.error().message();

  Expected<CudaDevice> device = CudaDevice::forLocalRank(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message(), count.error().message());

  Expected<Stream> stream = Stream::create("compute");
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.error().message().rfind("creating the compute stream: cudaError", 0), 0u)
      << stream.error().message();

  Expected<Event> event = Event::create();
  ASSERT_FALSE(event.ok());
  EXPECT_NE(event.error().message().find("creating an event: cudaError"), std::string::npos);
}

} // namespace
} // namespace mtc::rt::cuda::test

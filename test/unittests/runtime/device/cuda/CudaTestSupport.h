//===- CudaTestSupport.h - The GPU test fixture -----------------*- C++ -*-===//
//
// Tests that execute on a GPU derive their fixture from CudaDeviceTest: without a usable
// device it skips the test and says why (the device layer's own "no CUDA device" error).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_DEVICE_CUDA_CUDATESTSUPPORT_H
#define MTC_TEST_UNITTESTS_RUNTIME_DEVICE_CUDA_CUDATESTSUPPORT_H

#include "runtime/device/cuda/CudaDevice.h"

#include <gtest/gtest.h>

#include <optional>

namespace mtc::rt::cuda::test {

class CudaDeviceTest : public testing::Test {
protected:
  void SetUp() override {
    Expected<CudaDevice> device = CudaDevice::forLocalRank(0);
    if (!device)
      GTEST_SKIP() << "needs a CUDA device: " << device.error().message();
    device_.emplace(std::move(*device));
  }

  const CudaDevice &device() const { return *device_; }

private:
  std::optional<CudaDevice> device_;
};

/// Whether this process sees a usable CUDA device (the tests of the no-device errors run only
/// where it does not).
inline bool haveCudaDevice() { return visibleDeviceCount().ok(); }

} // namespace mtc::rt::cuda::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_DEVICE_CUDA_CUDATESTSUPPORT_H

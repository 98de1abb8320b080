//===- CudaDevice.cpp - The CUDA device a rank runs on -------------------===//

#include "runtime/device/cuda/CudaDevice.h"

#include "runtime/device/cuda/CudaError.h"

#include <cuda_runtime_api.h>

#include <cstdio>

namespace mtc::rt::cuda {

Expected<int> visibleDeviceCount() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    return cudaStatus(status, meansNoDevice(status) ? "no CUDA device: cudaGetDeviceCount"
                                                    : "counting the CUDA devices");
  if (count <= 0)
    return makeError("no CUDA device: cudaGetDeviceCount found 0 devices");
  return count;
}

Expected<int> deviceOrdinalForLocalRank(int localRank, int deviceCount) {
  if (localRank < 0)
    return makeError("local rank ", localRank, " is negative");
  if (deviceCount <= 0)
    return makeError("no CUDA device: 0 devices visible");
  if (deviceCount == 1)
    return 0;
  if (localRank >= deviceCount)
    return makeError("local rank ", localRank, " has no CUDA device of its own: ", deviceCount,
                     " devices are visible (run at most one rank per GPU)");
  return localRank;
}

Error checkDevicesForLocalRanks(int localRanks, int deviceCount) {
  if (deviceCount <= 0)
    return makeError("no CUDA device: 0 devices visible");
  if (localRanks > deviceCount)
    return makeError(localRanks, " ranks on this host need a GPU each, and ", deviceCount,
                     deviceCount == 1 ? " CUDA device is" : " CUDA devices are",
                     " visible (run at most one rank per GPU)");
  return Error::success();
}

Expected<CudaDevice> CudaDevice::forLocalRank(int localRank) {
  Expected<int> count = visibleDeviceCount();
  if (!count)
    return count.takeError();
  Expected<int> ordinal = deviceOrdinalForLocalRank(localRank, *count);
  if (!ordinal)
    return ordinal.takeError();

  CudaDevice device;
  device.ordinal_ = *ordinal;
  if (Error e = device.makeCurrent(); !e.ok())
    return e;
  cudaDeviceProp props{};
  if (Error e = cudaStatus(cudaGetDeviceProperties(&props, device.ordinal_),
                           concat("reading the properties of CUDA device ", device.ordinal_));
      !e.ok())
    return e;
  device.name_ = props.name;
  device.totalMemoryBytes_ = static_cast<int64_t>(props.totalGlobalMem);
  device.computeMajor_ = props.major;
  device.computeMinor_ = props.minor;
  device.multiprocessors_ = props.multiProcessorCount;
  return device;
}

std::string CudaDevice::describe() const {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB",
                static_cast<double>(totalMemoryBytes_) / (1024.0 * 1024.0 * 1024.0));
  return concat(name_, " (device ", ordinal_, ", sm_", computeMajor_, computeMinor_, ", ",
                multiprocessors_, " SMs, ", std::string(gib), ")");
}

Error CudaDevice::makeCurrent() const {
  return cudaStatus(cudaSetDevice(ordinal_), concat("making CUDA device ", ordinal_, " current"));
}

Expected<DeviceMemory> CudaDevice::memory() const {
  if (Error e = makeCurrent(); !e.ok())
    return e;
  size_t freeBytes = 0, totalBytes = 0;
  if (Error e = cudaStatus(cudaMemGetInfo(&freeBytes, &totalBytes),
                           concat("reading the memory of CUDA device ", ordinal_));
      !e.ok())
    return e;
  return DeviceMemory{static_cast<int64_t>(freeBytes), static_cast<int64_t>(totalBytes)};
}

} // namespace mtc::rt::cuda

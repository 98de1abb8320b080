//===- DeviceArena.cpp - One device allocation for a rank's buffers ------===//

#include "runtime/device/cuda/DeviceArena.h"

#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/CudaError.h"

#include <cuda_runtime_api.h>

#include <utility>

namespace mtc::rt::cuda {

Expected<DeviceArena> DeviceArena::create(const CudaDevice &device, int64_t bytes) {
  if (bytes < 0)
    return makeError("device arena: cannot allocate ", bytes, " bytes");
  if (Error e = device.makeCurrent(); !e.ok())
    return e;
  void *base = nullptr;
  if (bytes > 0) {
    if (Error e = cudaStatus(cudaMalloc(&base, static_cast<size_t>(bytes)),
                             concat("allocating the device arena (", bytes, " bytes on device ",
                                    device.ordinal(), ")"));
        !e.ok())
      return e;
  }
  return DeviceArena(base, bytes);
}

DeviceArena::DeviceArena(DeviceArena &&other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      layout_(std::exchange(other.layout_, ArenaLayout(0))) {}

DeviceArena &DeviceArena::operator=(DeviceArena &&other) noexcept {
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    layout_ = std::exchange(other.layout_, ArenaLayout(0));
  }
  return *this;
}

DeviceArena::~DeviceArena() { release(); }

void DeviceArena::release() {
  if (!base_)
    return;
  // cudaFree of memory of another device than the current one is allowed (unified
  // addressing), so the current device is left alone.
  (void)cudaFree(base_);
  base_ = nullptr;
}

Expected<void *> DeviceArena::allocate(int64_t bytes, int64_t alignment) {
  Expected<int64_t> offset = layout_.allocate(bytes, alignment);
  if (!offset)
    return offset.takeError();
  return static_cast<void *>(static_cast<char *>(base_) + *offset);
}

Expected<void *> DeviceArena::at(int64_t offset, int64_t bytes) {
  if (Error e = layout_.use(offset, bytes); !e.ok())
    return e;
  return static_cast<void *>(static_cast<char *>(base_) + offset);
}

} // namespace mtc::rt::cuda

//===- DeviceArena.h - One device allocation for a rank's buffers -*- C++ -*-===//
//
// The rank's device memory is one cudaMalloc sized from the plan's memory plan (its predicted
// peak bytes per rank); buffers are offsets in it (ArenaLayout), so the executor never
// allocates during a step and the measured high-water mark is comparable with the plan's
// prediction. Owns the allocation (freed on destruction; movable, not copyable).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_DEVICEARENA_H
#define MTC_RUNTIME_DEVICE_CUDA_DEVICEARENA_H

#include "runtime/device/cuda/ArenaLayout.h"
#include "runtime/support/Error.h"

#include <cstdint>

namespace mtc::rt::cuda {

class CudaDevice;

class DeviceArena {
public:
  /// Allocates `bytes` on `device` (which it makes current).
  static Expected<DeviceArena> create(const CudaDevice &device, int64_t bytes);

  DeviceArena(DeviceArena &&other) noexcept;
  DeviceArena &operator=(DeviceArena &&other) noexcept;
  DeviceArena(const DeviceArena &) = delete;
  DeviceArena &operator=(const DeviceArena &) = delete;
  ~DeviceArena();

  /// A device pointer to `bytes` new bytes (ArenaLayout::allocate).
  Expected<void *> allocate(int64_t bytes, int64_t alignment = kDeviceArenaAlignment);
  /// The device pointer of a range the memory plan placed, bounds-checked (ArenaLayout::use).
  Expected<void *> at(int64_t offset, int64_t bytes);

  const ArenaLayout &layout() const { return layout_; }
  void resetAllocations() { layout_.reset(); }
  void *base() const { return base_; }

private:
  DeviceArena(void *base, int64_t bytes) : base_(base), layout_(bytes) {}
  void release();

  void *base_ = nullptr;
  ArenaLayout layout_;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_DEVICEARENA_H

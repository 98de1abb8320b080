//===- ArenaLayout.h - Offsets in one device allocation ---------*- C++ -*-===//
//
// The bookkeeping of DeviceArena without the device, so that it is tested everywhere: a
// capacity in bytes, offsets handed out from the start (a bump pointer, for buffers the
// runtime places itself), ranges the plan's memory plan already placed (checked against the
// capacity), and the high-water mark of everything used, which mtrun reports beside the
// plan's predicted peak.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_ARENALAYOUT_H
#define MTC_RUNTIME_DEVICE_CUDA_ARENALAYOUT_H

#include "runtime/support/Error.h"

#include <cstdint>

namespace mtc::rt::cuda {

/// The default alignment of an offset handed out: cudaMalloc's own (256 bytes), which covers
/// every vector load and the plan's 64-byte arena alignment.
inline constexpr int64_t kDeviceArenaAlignment = 256;

class ArenaLayout {
public:
  explicit ArenaLayout(int64_t capacityBytes) : capacity_(capacityBytes < 0 ? 0 : capacityBytes) {}

  int64_t capacity() const { return capacity_; }
  /// The end of the last offset handed out by allocate().
  int64_t allocatedBytes() const { return next_; }
  /// The largest end of any range handed out or used since construction.
  int64_t highWaterBytes() const { return highWater_; }

  /// The offset of `bytes` new bytes aligned to `alignment` (a power of two), after
  /// everything allocated so far; an error when they do not fit.
  Expected<int64_t> allocate(int64_t bytes, int64_t alignment = kDeviceArenaAlignment);

  /// Checks that [offset, offset + bytes) lies inside the arena (0 <= offset, 0 <= bytes,
  /// no overflow) and records it in the high-water mark: for offsets a memory plan computed.
  Error use(int64_t offset, int64_t bytes);

  /// Forgets the offsets allocate() handed out (the high-water mark stays): the next step
  /// places its buffers from the start again.
  void reset() { next_ = 0; }

private:
  Error checkRange(int64_t offset, int64_t bytes) const;

  int64_t capacity_;
  int64_t next_ = 0;
  int64_t highWater_ = 0;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_ARENALAYOUT_H

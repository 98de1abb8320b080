//===- ArenaLayout.cpp - Offsets in one device allocation ----------------===//

#include "runtime/device/cuda/ArenaLayout.h"

#include <algorithm>
#include <limits>

namespace mtc::rt::cuda {

Expected<int64_t> ArenaLayout::allocate(int64_t bytes, int64_t alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    return makeError("device arena: alignment ", alignment, " is not a power of two");
  if (bytes < 0)
    return makeError("device arena: cannot allocate ", bytes, " bytes");
  // next_ <= capacity_, so rounding it up cannot overflow unless the capacity is near the
  // int64 limit; check anyway.
  if (next_ > std::numeric_limits<int64_t>::max() - (alignment - 1))
    return makeError("device arena: offset overflow");
  int64_t offset = (next_ + alignment - 1) & ~(alignment - 1);
  if (offset > capacity_ || bytes > capacity_ - offset)
    return makeError("device arena: ", bytes, " bytes (aligned to ", alignment,
                     ") do not fit: ", capacity_ - std::min(offset, capacity_), " of ", capacity_,
                     " bytes left");
  next_ = offset + bytes;
  highWater_ = std::max(highWater_, next_);
  return offset;
}

Error ArenaLayout::checkRange(int64_t offset, int64_t bytes) const {
  if (offset < 0 || bytes < 0)
    return makeError("device arena: range at offset ", offset, " of ", bytes, " bytes is negative");
  if (offset > capacity_ || bytes > capacity_ - offset)
    return makeError("device arena: range at offset ", offset, " of ", bytes,
                     " bytes ends past the arena's ", capacity_, " bytes");
  return Error::success();
}

Error ArenaLayout::use(int64_t offset, int64_t bytes) {
  if (Error e = checkRange(offset, bytes); !e.ok())
    return e;
  highWater_ = std::max(highWater_, offset + bytes);
  return Error::success();
}

} // namespace mtc::rt::cuda

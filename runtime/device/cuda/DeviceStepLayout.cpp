//===- DeviceStepLayout.cpp - Where a one-GPU step's buffers lie ----------===//

#include "runtime/device/cuda/DeviceStepLayout.h"

#include "runtime/device/cuda/ArenaLayout.h"

#include <limits>

namespace mtc::rt::cuda {
namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 2;

/// Bytes of `elements` elements of `size` bytes; an error when they cannot be counted.
Expected<int64_t> bytesOf(int64_t elements, int64_t size, const char *what) {
  if (elements < 0 || elements > kMaxBytes / size)
    return makeError("device step layout: ", elements, " elements of ", what,
                     " are not a size");
  return elements * size;
}

} // namespace

Expected<DeviceStepLayout> DeviceStepLayout::create(const TrainingState &state,
                                                    const DeviceStepShape &shape) {
  if (shape.microBatches < 1)
    return makeError("device step layout: ", shape.microBatches, " micro-batches");
  if (shape.workspaceBytes < 0 || shape.workspaceBytes > kMaxBytes)
    return makeError("device step layout: a workspace of ", shape.workspaceBytes, " bytes");
  ArenaLayout arena(kMaxBytes);
  DeviceStepLayout layout;
  auto place = [&](int64_t bytes) -> Expected<ArenaRange> {
    Expected<int64_t> offset = arena.allocate(bytes);
    if (!offset)
      return offset.takeError();
    return ArenaRange{*offset, bytes};
  };
  auto placeTable = [&](const std::vector<TrainingState::Tensor> &table,
                        std::vector<ArenaRange> &out) -> Error {
    for (const TrainingState::Tensor &t : table) {
      Expected<int64_t> bytes = bytesOf(static_cast<int64_t>(t.values.size()), 4, t.name.c_str());
      if (!bytes)
        return bytes.takeError();
      Expected<ArenaRange> range = place(*bytes);
      if (!range)
        return range.takeError();
      out.push_back(*range);
    }
    return Error::success();
  };
  if (Error err = placeTable(state.params, layout.params); !err.ok())
    return err;
  if (!shape.optimizerOnHost)
    if (Error err = placeTable(state.states, layout.states); !err.ok())
      return err;
  // The gradients: one range, each gradient aligned within it as the arena aligns ranges.
  int64_t gradientBytes = 0;
  for (const ArenaRange &p : layout.params) {
    gradientBytes = (gradientBytes + kDeviceArenaAlignment - 1) & ~(kDeviceArenaAlignment - 1);
    layout.gradientOffsets.push_back(gradientBytes);
    gradientBytes += p.bytes;
  }
  Expected<ArenaRange> gradients = place(gradientBytes);
  if (!gradients)
    return gradients.takeError();
  layout.gradients = *gradients;
  if (shape.microBatches > 1) {
    Expected<ArenaRange> scratch = place(gradientBytes);
    if (!scratch)
      return scratch.takeError();
    layout.scratch = *scratch;
  }
  if (shape.microBatchSize < 0 || shape.sequenceLength < 0 ||
      (shape.sequenceLength > 0 && shape.microBatchSize > kMaxBytes / shape.sequenceLength))
    return makeError("device step layout: a micro-batch of ", shape.microBatchSize, " x ",
                     shape.sequenceLength, " tokens");
  Expected<int64_t> tokenBytes = bytesOf(shape.microBatchSize * shape.sequenceLength, 4, "tokens");
  if (!tokenBytes)
    return tokenBytes.takeError();
  for (ArenaRange *r : {&layout.tokens, &layout.labels}) {
    Expected<ArenaRange> range = place(*tokenBytes);
    if (!range)
      return range.takeError();
    *r = *range;
  }
  if (shape.lossMask) {
    Expected<ArenaRange> range = place(*tokenBytes); // f32 as i32: 4 bytes each
    if (!range)
      return range.takeError();
    layout.lossMask = *range;
  }
  if (shape.positionIds) {
    Expected<ArenaRange> range = place(*tokenBytes);
    if (!range)
      return range.takeError();
    layout.positionIds = *range;
  }
  for (ArenaRange *r : {&layout.loss, &layout.step, &layout.gradScale, &layout.gradNorm, &layout.lr}) {
    Expected<ArenaRange> range = place(4);
    if (!range)
      return range.takeError();
    *r = *range;
  }
  for (int64_t elements : shape.expertLoadElements) {
    Expected<int64_t> bytes = bytesOf(elements, 8, "an expert load");
    if (!bytes)
      return bytes.takeError();
    Expected<ArenaRange> range = place(*bytes);
    if (!range)
      return range.takeError();
    layout.expertLoads.push_back(*range);
  }
  Expected<ArenaRange> workspace = place(shape.workspaceBytes);
  if (!workspace)
    return workspace.takeError();
  layout.workspace = *workspace;
  layout.bytes = arena.allocatedBytes();
  return layout;
}

} // namespace mtc::rt::cuda

//===- DeviceStepLayout.h - Where a one-GPU step's buffers lie -*- C++ -*-===//
//
// CudaTrainer (CudaTrainer.h) keeps everything a step reads and writes in one device arena,
// allocated once: the layout says where each buffer lies, as offsets from the arena's start,
// and how large the arena is. It needs no device, so it is computed (and tested) anywhere:
//
//   parameters, states   once each: the optimizer step updates them in place; with the
//                        optimizer on the host (optimizer offload, DeviceTrainer.h) the
//                        parameters and no state
//   gradients            one contiguous range, every gradient in the parameters' order, so
//                        a later micro-batch's gradients (`scratch`, laid out the same way,
//                        present only with several micro-batches) are added in one call
//   tokens, labels       i32 [micro-batch, sequence]; the loss mask f32 and the position
//                        ids i32, of the same shape, when the step takes them
//   scalars              the loss, the step, the gradient scale, the gradient norm and the
//                        learning rate (the step functions read and write them in device
//                        memory: the host code never dereferences a buffer)
//   expert loads         i64 [layers, experts] per forward_backward `expert_load` output
//   workspace            the host code's temporaries (kernels.cuda.host.workspace_bytes)
//
// Every range starts on the arena's alignment (256 bytes, cudaMalloc's own), so that every
// buffer a GEMM reads meets cuBLASLt's strictest alignment.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_DEVICESTEPLAYOUT_H
#define MTC_RUNTIME_DEVICE_CUDA_DEVICESTEPLAYOUT_H

#include "runtime/exec/TrainingState.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mtc::rt::cuda {

/// A range of the arena: [offset, offset + bytes).
struct ArenaRange {
  int64_t offset = 0;
  int64_t bytes = 0;
};

/// The sizes a layout is computed from.
struct DeviceStepShape {
  int64_t microBatchSize = 0, sequenceLength = 0;
  /// Micro-batches each step (several: the scratch gradients are needed).
  int64_t microBatches = 1;
  /// Whether the step takes a loss mask (f32, a micro-batch's shape; Plan::eodMaskLoss).
  bool lossMask = false;
  /// Whether the step takes position ids (i32, a micro-batch's shape;
  /// Plan::takesPositionIds).
  bool positionIds = false;
  /// Elements of each expert_load output of forward_backward (i64).
  std::vector<int64_t> expertLoadElements;
  /// The host code's workspace.
  int64_t workspaceBytes = 0;
  /// Whether the optimizer step runs on the host (optimizer offload): the device holds the
  /// parameters and no state (`states` empty).
  bool optimizerOnHost = false;
};

struct DeviceStepLayout {
  /// One range per parameter and per state, in the state's table order.
  std::vector<ArenaRange> params, states;
  /// All gradients; param i's starts gradientOffsets[i] bytes into it (and into scratch).
  ArenaRange gradients;
  std::vector<int64_t> gradientOffsets;
  std::optional<ArenaRange> scratch;
  ArenaRange tokens, labels;
  std::optional<ArenaRange> lossMask, positionIds;
  ArenaRange loss, step, gradScale, gradNorm, lr;
  std::vector<ArenaRange> expertLoads;
  ArenaRange workspace;
  /// The arena's size: the end of the last range.
  int64_t bytes = 0;

  /// The layout for `state`'s tables (f32 tensors) and `shape`; an error for negative or
  /// overflowing sizes.
  static Expected<DeviceStepLayout> create(const TrainingState &state, const DeviceStepShape &shape);
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_DEVICESTEPLAYOUT_H

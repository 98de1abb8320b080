//===- Checkpoint.h - Saving and resuming a training run ---------*- C++ -*-===//
//
// A checkpoint is a directory holding `checkpoint.safetensors`: every parameter as
// `param:<name>` and every optimizer state as `state:<name>` (F32, stored dims), with the
// metadata
//
//   format = mtc-checkpoint   version = 1   model = <plan's model>   step = <steps taken>
//   seed = <plan seed>        plan_sha256 = <plan.json it was trained with>
//   crc32c:<tensor> = <8 hex digits, CRC-32C of the tensor's bytes>   (one per tensor)
//
// and, from a run with fp16 loss scaling (LossScaler.h), its scaler's state: `loss_scale`
// (the f32 scale, shortest round-trip text), `loss_scale_growth_tracker`,
// `loss_scale_hysteresis_tracker` and `skipped_steps` (Megatron keeps the same three in its
// grad scaler's state dict), all four or none. A checkpoint loads under any precision: a
// plan without loss scaling carries the state on unused, and the skipped steps still count
// out of the optimizer's steps (TrainingState::optimizerSteps).
//
// The file is written atomically (temporary file, fsync, rename), so a crash while saving
// leaves the previous checkpoint intact; the temporary a killed save leaves is removed by the
// next save or load of the directory (support/TemporaryFiles.h). Loading verifies the structure, the format, that
// the checkpoint is of the plan's model with the same parameter and state tables (names and
// shapes), and every tensor's checksum; each failure is an error naming the directory and
// the problem. Resuming from a checkpoint continues the run bit for bit: the data and the
// dropout masks of step s depend only on (seed, s).
//
// A plan whose vocabulary the compiler padded for tp (Plan::vocabularyPadded) stores every
// tensor with the vocabulary at its real size: the padding is stripped on save and export
// and restored (zeros) on load, so a checkpoint loads under any tp.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_CHECKPOINT_H
#define MTC_RUNTIME_EXEC_CHECKPOINT_H

#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <filesystem>

namespace mtc::rt {

inline constexpr std::string_view kCheckpointFileName = "checkpoint.safetensors";
inline constexpr int kCheckpointVersion = 1;

/// `state` (whole tensors, plan order) with the vocabulary at its real size: what
/// checkpoints and safetensors exports hold. A copy of `state` when nothing is padded.
TrainingState withRealVocabulary(const Plan &plan, const TrainingState &state);

/// Writes `state` (whole tensors) to the checkpoint directory `dir` (created if needed).
Error saveCheckpoint(const std::filesystem::path &dir, const Plan &plan,
                     const TrainingState &state);

/// Reads and verifies the checkpoint in `dir` against `plan`.
Expected<TrainingState> loadCheckpoint(const std::filesystem::path &dir, const Plan &plan);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_CHECKPOINT_H

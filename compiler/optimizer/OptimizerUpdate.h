//===- OptimizerUpdate.h - the optimizer's math built from values -*- C++ -*-===//
//
// The pieces of one optimizer step, built with a TensorBuilder from values the caller
// provides: the scaled gradients and their sum of squares, the clip coefficient, the
// learning rate of the step and each parameter's update. The whole-model
// `@optimizer_step` (mt-optimizer) and the per-stage steps of pipeline plans
// (mt-pipeline-optimizer) are both built from these, so the two compute the same update.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_OPTIMIZER_OPTIMIZERUPDATE_H
#define MTC_COMPILER_OPTIMIZER_OPTIMIZERUPDATE_H

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mtc::optimizer {

/// Function attribute of the functions that take gradients and optimizer states in their
/// optimizer layout (sharded over dp with the distributed optimizer): `@optimizer_step`
/// and the pipeline stages' `grad_squares` / `optimizer_step`.
inline constexpr llvm::StringLiteral kOptimizerAttrName = "mt.optimizer";

/// The settings of the step, read from the module's `#mt.train` (whose verifier checks
/// the values; the defaults stand for absent fields).
struct OptimizerSettings {
  mt::OptimizerKind kind = mt::OptimizerKind::AdamW;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
  double momentum = 0;
  mt::LrScheduleKind schedule = mt::LrScheduleKind::Constant;
  double warmup = 0, minLr = 0, decaySteps = 0;
  double clipGrad = 0;
};

/// Reads the settings of `module`; emits an error and fails on a schedule that cannot
/// decay (decay steps not above the warm-up).
mlir::FailureOr<OptimizerSettings> readOptimizerSettings(mlir::ModuleOp module);

/// The optimizer states every parameter has, in declaration order: the suffixes of the
/// `mt.state` symbols `<param>.<role>`.
llvm::SmallVector<llvm::StringRef> stateRoles(const OptimizerSettings &settings);

/// `tensor` times f32 scalar `scalar`, taken to the tensor's element type.
mlir::Value scaleBy(mt::TensorBuilder &t, mlir::Value tensor, mlir::Value scalar);

/// The f32 sum over `grads` of the sum of their squared elements (every element counted
/// once; partitioning sums the shards); 0 for no gradients. `f32Scalar` is any f32 scalar
/// of the function (the type of the result).
mlir::Value sumOfSquares(mt::TensorBuilder &t, llvm::ArrayRef<mlir::Value> grads,
                         mlir::Value f32Scalar);

/// min(1, clip_grad / (norm + 1e-6)) for the global norm `norm` (f32); null when the
/// settings do not clip.
mlir::Value clipCoefficient(mt::TensorBuilder &t, const OptimizerSettings &settings,
                            mlir::Value norm);

/// The f32 scalars every parameter's update shares.
struct StepScalars {
  /// The learning rate of step `%step` (0-based): constant, or a linear warm-up followed
  /// by cosine or linear decay.
  mlir::Value lr;
  /// AdamW's bias corrections 1 - beta^(step + 1).
  mlir::Value correction1, correction2;
};
StepScalars buildStepScalars(mt::TensorBuilder &t, const OptimizerSettings &settings,
                             mlir::Value step);

/// A parameter after the step and its states (stateRoles order).
struct UpdatedParameter {
  mlir::Value param;
  llvm::SmallVector<mlir::Value> states;
};

/// Updates parameter `param` (its storage type) from its scaled, clipped gradient `grad`
/// and its states `states` (stateRoles order) with AdamW or SGD (with momentum);
/// `decays` adds the decoupled (AdamW) or L2 (SGD) weight decay.
UpdatedParameter updateParameter(mt::TensorBuilder &t, const OptimizerSettings &settings,
                                 const StepScalars &scalars, mlir::Value param,
                                 mlir::Value grad, mlir::ValueRange states, bool decays);

} // namespace mtc::optimizer

#endif // MTC_COMPILER_OPTIMIZER_OPTIMIZERUPDATE_H

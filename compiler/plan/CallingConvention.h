//===- CallingConvention.h - how the runtime calls compiled steps -*- C++ -*-===//
//
// After mt-outline-parameters every step function is a pure function of explicit buffers;
// compiled to x86 each becomes `_mlir_ciface_<name>(context, inputs..., outputs...)`, the
// kernel context (runtime/exec/KernelABI.h) then one memref descriptor pointer per buffer.
// This describes, for the plan, which buffer is which.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PLAN_CALLINGCONVENTION_H
#define MTC_COMPILER_PLAN_CALLINGCONVENTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace mtc {

/// `{"forward_backward": {"symbol", "inputs": [...], "outputs": [...]}, ...}` for the
/// outlined step functions of `module`. Each buffer is `{"kind", "name", "dtype", "dims"}`
/// with kind `input`, `param`, `state`, `grad`, `loss`, `logits` (what the generation
/// function `logits`, mt-logits, returns), `grad_norm` or `lr`. The pipeline
/// chunk functions (mt-pipeline-chunks) are there too, with their `chunk` and `layers`
/// ([first, count]) and buffers also of kind `activation`, `activation_grad`, `residual`
/// or `stash` (the last two with their `index`).
llvm::json::Object describeCallingConvention(mlir::ModuleOp module);

/// With pipeline parallelism (the module has mt-pipeline-chunks' chunks), erases the
/// whole-model entry functions `forward`, `forward_backward`, `optimizer_step` and `logits`
/// from `module` (a partitioned step): no pipeline rank calls them (it trains and evaluates
/// through its chunks' and its stage's functions, and generation refuses pipeline plans),
/// and compiled they would only cost time and memory: the workspace placement gives the
/// layer functions the chunks share offsets above what the whole step holds around its
/// calls, which inflates every chunk function's arena. Does nothing without a pipeline.
void eraseSingleStageEntries(mlir::ModuleOp module);

/// The plan's name of an element type: f32, bf16, f16, f64, i32, i64 (docs/plan-format.md).
std::string planDTypeName(mlir::Type type);

} // namespace mtc

#endif // MTC_COMPILER_PLAN_CALLINGCONVENTION_H

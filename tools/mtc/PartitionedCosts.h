//===- PartitionedCosts.h - a plan's predictions without kernels -*- C++ -*-===//
//
// `mtc compile --target=none` writes plan.json's `predictions.functions` (and
// `communication_bytes`) as a plan with kernels has them: the training step partitioned
// (mtc-partition-pipeline) on a copy, then counted (compiler/analysis/FunctionCost.h,
// compiler/sharding/CommunicationVolume.h), without lowering to linalg or generating code, so
// `mtc simulate` predicts a llama2-7b-sized plan compiled in seconds instead of a minute.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTC_PARTITIONEDCOSTS_H
#define MTC_TOOLS_MTC_PARTITIONEDCOSTS_H

#include "compiler/plan/PlanWriter.h"
#include "mlir/IR/BuiltinOps.h"

namespace mtc {

/// The function costs and collectives of `trained` (the output of the training pipeline;
/// not changed) in a PlanKernels without kernels. Fails (diagnostics on the module) when the
/// partition does.
mlir::FailureOr<PlanKernels> partitionedCosts(mlir::ModuleOp trained);

} // namespace mtc

#endif // MTC_TOOLS_MTC_PARTITIONEDCOSTS_H

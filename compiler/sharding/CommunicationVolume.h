//===- CommunicationVolume.h - bytes a partitioned step sends ---*- C++ -*-===//
//
// The cost model's communication figure: what one rank sends in the collectives of a
// partitioned step (after mtp-partition), counted as the ring algorithms do (the runtime's
// Gloo backend uses them): an all-reduce over n ranks sends 2 (n - 1) / n of the buffer, an
// all-gather (n - 1) times its local part, a reduce-scatter (n - 1) times the part it keeps,
// an all-to-all (n - 1) / n of its local buffer (every block but the one it keeps); one of
// filled expert slots as many at most, plus (n - 1) / n of the counts (i64 per expert); a
// shift its local buffer once.
// Scans count their layer function once per repeat.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_SHARDING_COMMUNICATIONVOLUME_H
#define MTC_COMPILER_SHARDING_COMMUNICATIONVOLUME_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc::sharding {

/// Collectives of one kind over one mesh axis with one buffer size, as the runtime runs them
/// (docs/plan-format.md, "Predictions"): what the cost model times with its alpha-beta
/// model. `kind` is the algorithm: "all_reduce" (a ring sum), "all_gather" (also a maximum
/// or minimum all-reduce, which the runtime gathers), "reduce_scatter", "all_to_all" or
/// "shift" (a point-to-point send to a neighbour on the axis). `bytes` is the buffer the
/// formula of the kind takes: an all-reduce's, an all-gather's local part, a
/// reduce-scatter's whole input, an all-to-all's or a shift's local buffer.
struct CollectiveCall {
  std::string kind;
  std::string axis;
  int64_t groupSize = 1;
  int64_t bytes = 0;
  /// Calls per call of the function (a layer's collectives once per repeat).
  int64_t count = 0;
  /// The buffer has the micro-batch dimension (`batch`): its bytes grow with the
  /// micro-batch (the layout search scales a step compiled at one micro-batch by it).
  bool batched = false;
};

/// Bytes one rank sends per call of each step function.
struct CollectiveBytes {
  int64_t forwardBackward = 0; // per micro-batch
  int64_t optimizerStep = 0;
  /// Per call of each pipeline function (`chunk<c>.forward`, ..., `stage<s>.optimizer_step`),
  /// by name; empty without pipeline parallelism.
  std::map<std::string, int64_t> pipelineFunctions;
  /// The step moves only the filled slots of dropless expert routing (mtp.all_to_all with
  /// filled counts), which depend on the data: the figures are for every slot filled (plus
  /// the counts' exchange), an upper bound.
  bool upperBound = false;
  /// Per step function (`forward_backward`, `optimizer_step` and the pipeline functions,
  /// by name): its collectives, identical ones merged, in order of first occurrence.
  std::map<std::string, std::vector<CollectiveCall>> calls;
};

/// The figures for `module`'s `forward_backward` and `optimizer_step` and its pipeline
/// chunks' and stages' functions (0 where absent or not partitioned).
CollectiveBytes predictCollectiveBytes(mlir::ModuleOp module);

/// The collectives of one call of `module`'s function `name` (its calls and layer scans
/// included), identical ones merged; empty when there is no such function.
std::vector<CollectiveCall> predictFunctionCollectives(mlir::ModuleOp module, llvm::StringRef name);

/// The collectives of `op` (an op of one of `module`'s functions) and the ops nested in it.
std::vector<CollectiveCall> predictOpCollectives(mlir::ModuleOp module, mlir::Operation *op);

} // namespace mtc::sharding

#endif // MTC_COMPILER_SHARDING_COMMUNICATIONVOLUME_H

//===- SavedActivations.h - what each layer keeps for its backward -*- C++ -*-===//
//
// The values one instance of each layer's forward (`@L.fwd`, mt-autodiff) keeps for its
// backward under the recompute policy, on one rank: read from the partitioned step (after
// mtc-partition-pipeline), so tensor, sequence and context parallelism shrink them as they
// shrink what the runtime holds. `mtc compile --stats --saved-activations` prints them, one
// line per tensor, to compare a layer's activation memory with published formulas
// (docs/cost-model.md, "Activation memory against Korthikanti et al.").
//
// The plan's `predictions.memory_bytes.saved_activations` sums the same set over the layers
// of the stack, on the global (unpartitioned) types and with mt-expert-load's routing counts,
// which this leaves out (stacked like the saved values, but not read by the backward).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_ANALYSIS_SAVEDACTIVATIONS_H
#define MTC_COMPILER_ANALYSIS_SAVEDACTIVATIONS_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc {

struct SavedValue {
  /// What produces it: the op's name (`mt.layer_norm`), or `argument N` of the layer.
  std::string producer;
  /// Where in the model source it is computed (`model.mtl:38:11`), or empty.
  std::string location;
  /// Its type on one rank.
  mt::NamedTensorType type;
  int64_t bytes = 0;
};

struct LayerSavedActivations {
  /// The layer forward (`block.fwd`) and how many instances the stack runs.
  std::string function;
  int64_t instances = 0;
  std::vector<SavedValue> values;
  int64_t bytes() const;
};

/// The saved values of every layer forward that `forward_backward` repeats, in order of
/// the repeats. Fails with a diagnostic when the module has no `forward_backward`.
mlir::FailureOr<std::vector<LayerSavedActivations>>
computeSavedActivations(mlir::ModuleOp partitioned);

/// The table `mtc compile --stats --saved-activations` prints.
void printSavedActivations(const std::vector<LayerSavedActivations> &layers,
                           llvm::raw_ostream &os);

} // namespace mtc

#endif // MTC_COMPILER_ANALYSIS_SAVEDACTIVATIONS_H

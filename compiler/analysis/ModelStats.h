//===- ModelStats.h - parameter counts and FLOPs of an mt model -*- C++ -*-===//
//
// What `mtc compile --stats` prints: every parameter with its instance count (a layer's
// parameters exist once per repeat) and the model's FLOPs per token. FLOPs follow the
// convention of Megatron-LM's MFU estimate: matrix products only (contractions and the two
// products inside attention, counted in full even when causal), backward = 2 x forward.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_ANALYSIS_MODELSTATS_H
#define MTC_COMPILER_ANALYSIS_MODELSTATS_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mtc {

struct ParamStat {
  std::string name;
  mt::NamedTensorType type;
  /// How many instances exist: the repeat count of the owning layer, or 1.
  int64_t instances = 1;
  int64_t total() const { return type.getNumElements() * instances; }
};

struct ModelStats {
  std::string modelName;
  std::vector<ParamStat> params;
  int64_t totalParams = 0;
  /// Tokens in one micro-batch of the entry function (elements of its first argument).
  int64_t tokensPerMicroBatch = 0;
  double forwardFlopsPerToken = 0;
  double backwardFlopsPerToken = 0;
};

/// Forward FLOPs by the convention above: of one op (a repeat counts its calls) or of one
/// call of a function, with repeated layers expanded; memoised per function.
class FlopCounter {
public:
  explicit FlopCounter(mlir::ModuleOp module) : symbols(module) {}

  double count(mlir::Operation *op);
  double count(mlir::func::FuncOp func);

private:
  mlir::SymbolTable symbols;
  llvm::DenseMap<mlir::Operation *, double> memo;
};

/// Computes the statistics of a verified `mt` module whose entry function is `forward`.
/// Fails with a diagnostic on the module when there is no entry function.
mlir::FailureOr<ModelStats> computeModelStats(mlir::ModuleOp module);

/// The table `mtc compile --stats` prints.
void printModelStats(const ModelStats &stats, llvm::raw_ostream &os);

} // namespace mtc

#endif // MTC_COMPILER_ANALYSIS_MODELSTATS_H

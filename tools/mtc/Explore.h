//===- Explore.h - mtc explore and mtc compile --auto ------------*- C++ -*-===//
//
// The compiler's side of the layout search (compiler/costmodel/LayoutSearch.h): the model
// compiled once per layout inside a layer (tp, sp, cp, ep, recomputation) through the
// training and partition pipelines, no code generation, and cut into LayerCosts; the search
// over the rest; `mtc explore`'s report and the choice `mtc compile --auto` compiles.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTC_EXPLORE_H
#define MTC_TOOLS_MTC_EXPLORE_H

#include "compiler/costmodel/LayoutSearch.h"
#include "frontend/AST.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace mtc {

/// The costs of the step of `model` (the frontend's `mt` module; not changed) compiled for
/// `layout`: the training pipeline and the partition pipeline on a copy. Fails, with the
/// reason, when the compiler refuses the layout.
llvm::Expected<costmodel::LayerCosts> measureLayerCosts(mlir::ModuleOp model,
                                                        const costmodel::LayerLayout &layout);

struct SearchRequest {
  std::string cluster; // a preset's name or a cluster file
  int64_t gpus = 0;
  int64_t rows = 10; // Pareto rows to print
};

/// What `mtc compile --auto` compiles: the fastest layout that fits.
struct AutoChoice {
  costmodel::LayerLayout inLayer;
  costmodel::Layout layout;
  std::vector<int64_t> chunkLayers;
};

/// Searches the layouts of `model` (the frontend's module of the parsed .mtl) on the
/// request's cluster and prints the report to `os`: with `table`, the Pareto table (`mtc
/// explore`); always the choice, why (the runner-up, the limiting resource). Fails with a
/// message naming the problem: an unknown cluster, a GPU count that does not fill its
/// nodes, a model no layout of which fits (naming the memory it needs and the device's).
llvm::Expected<AutoChoice> searchModel(mlir::ModuleOp model, const SearchRequest &request,
                                       bool table, llvm::raw_ostream &os);

/// `mtc explore --evaluate SPEC`: one layout, composed and printed (the step time and its
/// parts, the memory per rank), for comparison with `mtc simulate` of the same layout
/// compiled. SPEC is comma-separated `key=value`: tp, cp, ep, pp, dp, vpp (virtual stages),
/// mbs (micro-batch; under ZeRO-3 each rank's part), zero (0-3), recompute (none, selective,
/// full), schedule (1f1b, interleaved, zb-h1, zb-v), and `sp` alone.
llvm::Error evaluateLayout(mlir::ModuleOp model, const SearchRequest &request, llvm::StringRef spec,
                           llvm::raw_ostream &os);

/// Sets the AST's `train { KEY N }` (before lowering): the micro-batch the search chose, the
/// global batch `mtc explore --global-batch` gives.
void setTrainSetting(frontend::Module &ast, llvm::StringRef key, int64_t value);

/// The module's `mt.parallel` (and ZeRO stage) for `choice`, replacing `parallel auto`.
void applyChoice(mlir::ModuleOp module, const AutoChoice &choice);

} // namespace mtc

#endif // MTC_TOOLS_MTC_EXPLORE_H

//===- EraseMTDeclarations.cpp - drop the module-level mt declarations ----===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_ERASEMTDECLARATIONSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

struct EraseMTDeclarationsPass
    : public mtc::codegen::impl::EraseMTDeclarationsPassBase<EraseMTDeclarationsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (op.getDialect() && op.getDialect()->getNamespace() == "mt")
        op.erase();
  }
};

} // namespace

//===- ThreadKernelContext.cpp - the kernel context as an explicit argument ===//
//
// Gives every function with a body a first argument, the kernel context (an `!llvm.ptr` to
// the runtime's per-call state), and passes it on: to the functions of the module it calls,
// and as the first argument of every call of a runtime import of the kernel ABI
// (runtime/exec/KernelABI.h: collectives, GEMM, dropout key and layer, workspace, and the
// GPU host code's launch, workspace and GEMM), whose declarations
// get the parameter too. Functions linked into the object (mtc_dropout_keep_element) and
// other external declarations are left alone.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_THREADKERNELCONTEXTPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The runtime imports of the kernel ABI that take the context, as the compiler declares
/// them (the GEMM without its C-interface prefix).
bool takesContext(StringRef name) {
  static const llvm::StringSet<> imports = {
      MTC_ABI_ALL_REDUCE,       MTC_ABI_ALL_GATHER,
      MTC_ABI_REDUCE_SCATTER,   MTC_ABI_ALL_TO_ALL,
      MTC_ABI_SHIFT,            MTC_ABI_MESH_COORDINATE,
      MTC_ABI_DROPOUT_KEY,      MTC_ABI_DROPOUT_LAYER,
      MTC_ABI_BATCH_MATMUL_F32, MTC_ABI_BATCH_MATMUL_BF16,
      MTC_ABI_KERNEL_WORKSPACE,
      MTC_ABI_KERNEL_WORKSPACE_RELEASE, MTC_ABI_ALL_TO_ALL_FILLED,
      MTC_ABI_LOSS_SCALE,       MTC_ABI_GPU_LAUNCH,
      MTC_ABI_GPU_WORKSPACE,    MTC_ABI_GPU_WORKSPACE_RELEASE,
      MTC_ABI_GPU_BATCH_MATMUL_F32};
  return imports.contains(name);
}

struct ThreadKernelContextPass
    : public mtc::codegen::impl::ThreadKernelContextPassBase<ThreadKernelContextPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *mlirContext = &getContext();
    Type context = LLVM::LLVMPointerType::get(mlirContext);
    auto contextAttrs = DictionaryAttr::get(
        mlirContext,
        {NamedAttribute(StringAttr::get(mlirContext, mtc::codegen::kKernelContextAttrName),
                        UnitAttr::get(mlirContext))});

    // The functions that get the context: every body, and the runtime's imports.
    llvm::DenseSet<Operation *> threaded;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() || takesContext(func.getName()))
        threaded.insert(func);

    // Every use of those functions must be a call that can pass it, or a reference in the
    // attributes of another symbol (`mt.layer_of` of a layer's outlined functions), which
    // calls nothing.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!threaded.contains(func))
        continue;
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(func.getNameAttr(), module);
      if (!uses) {
        module.emitError("cannot find the uses of '") << func.getName() << "'";
        return signalPassFailure();
      }
      for (const SymbolTable::SymbolUse &use : *uses)
        if (!isa<func::CallOp, SymbolOpInterface>(use.getUser())) {
          use.getUser()->emitError("the kernel context cannot be passed through this use of '")
              << func.getName() << "' (only calls are supported)";
          return signalPassFailure();
        }
    }

    for (auto func : module.getOps<func::FuncOp>())
      if (threaded.contains(func) &&
          failed(func.insertArgument(0, context, contextAttrs, func.getLoc())))
        return signalPassFailure();

    // Calls pass their function's context first.
    SymbolTableCollection symbols;
    module.walk([&](func::CallOp call) {
      auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!callee || !threaded.contains(callee))
        return;
      auto caller = call->getParentOfType<func::FuncOp>();
      SmallVector<Value> operands = {caller.getArgument(0)};
      llvm::append_range(operands, call.getOperands());
      call->setOperands(operands);
    });
  }
};

} // namespace

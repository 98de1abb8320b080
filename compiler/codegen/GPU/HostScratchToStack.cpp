//===- HostScratchToStack.cpp - host-accessed buffers of the host code on the stack ===//
//
// The CUDA host code's temporaries are device memory: the workspace planner places every
// `memref.alloc` in the device workspace. The lowered deallocations (lower-deallocations'
// dealloc_helper, for a buffer a layer loop carries) allocate small arrays that the host
// code itself writes and reads; in device memory those accesses would fault. They move to
// the stack.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_GPUHOSTSCRATCHTOSTACKPASS
#include "compiler/codegen/GPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// Whether the host code loads from or stores into `buffer`, through casts and the
/// arguments of the functions of the module it is passed to.
bool accessedOnHost(Value buffer, SymbolTable &symbols, DenseSet<Value> &seen) {
  if (!seen.insert(buffer).second)
    return false;
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (auto load = dyn_cast<memref::LoadOp>(user); load && load.getMemRef() == buffer)
      return true;
    if (auto store = dyn_cast<memref::StoreOp>(user); store && store.getMemRef() == buffer)
      return true;
    if (auto cast = dyn_cast<memref::CastOp>(user)) {
      if (accessedOnHost(cast.getResult(), symbols, seen))
        return true;
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(user)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (callee && !callee.isExternal() &&
          accessedOnHost(callee.getArgument(use.getOperandNumber()), symbols, seen))
        return true;
    }
  }
  return false;
}

struct GPUHostScratchToStackPass
    : public mtc::codegen::impl::GPUHostScratchToStackPassBase<GPUHostScratchToStackPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<memref::AllocOp> scratch;
    module.walk([&](memref::AllocOp alloc) {
      DenseSet<Value> seen;
      if (accessedOnHost(alloc.getResult(), symbols, seen))
        scratch.push_back(alloc);
    });
    for (memref::AllocOp alloc : scratch) {
      if (!alloc.getDynamicSizes().empty() || !alloc.getSymbolOperands().empty()) {
        alloc.emitError("is read or written by the host code but has a dynamic size");
        return signalPassFailure();
      }
      auto function = alloc->getParentOfType<func::FuncOp>();
      if (!function) {
        alloc.emitError("is read or written by the host code outside a func.func");
        return signalPassFailure();
      }
      // At the function's entry: an alloca in a loop would grow the stack every iteration.
      auto builder = OpBuilder::atBlockBegin(&function.getBody().front());
      auto alloca = memref::AllocaOp::create(builder, alloc.getLoc(), alloc.getType(),
                                             alloc.getAlignmentAttr());
      for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        if (isa<memref::DeallocOp>(user))
          user->erase();
      alloc.replaceAllUsesWith(alloca.getResult());
      alloc.erase();
    }
  }
};

} // namespace

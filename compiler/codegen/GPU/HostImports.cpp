//===- HostImports.cpp - the device-memory variants of the runtime's imports ===//
//
// The CPU backend's passes produce the host code of a CUDA step (mtc-gpu-host-to-llvm-
// pipeline) and call the workspace and the GEMM by their CPU names; the CUDA step's buffers
// are device memory, which the runtime serves through the variants of KernelABI.h's GPU
// section. Renaming after mtc-workspace-views keeps that pass shared by both backends.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/GPU/Passes.h"

#include "runtime/exec/KernelABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_GPUHOSTIMPORTSPASS
#include "compiler/codegen/GPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

struct GPUHostImportsPass
    : public mtc::codegen::impl::GPUHostImportsPassBase<GPUHostImportsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    WalkResult unplaced = module.walk([](memref::AllocOp alloc) {
      alloc.emitError("is a temporary the workspace planner could not place, which the "
                      "CUDA host code cannot allocate on the device");
      return WalkResult::interrupt();
    });
    if (unplaced.wasInterrupted())
      return signalPassFailure();

    static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kRenames[] = {
        {MTC_ABI_KERNEL_WORKSPACE, MTC_ABI_GPU_WORKSPACE},
        {MTC_ABI_KERNEL_WORKSPACE_RELEASE, MTC_ABI_GPU_WORKSPACE_RELEASE},
        {MTC_ABI_BATCH_MATMUL_F32, MTC_ABI_GPU_BATCH_MATMUL_F32},
        {MTC_ABI_BATCH_MATMUL_BF16, MTC_ABI_GPU_BATCH_MATMUL_BF16}};
    for (auto [from, to] : kRenames) {
      auto func = module.lookupSymbol<func::FuncOp>(from);
      if (!func)
        continue;
      if (module.lookupSymbol(to)) {
        module.emitError("'") << to << "' is a runtime import and cannot be defined";
        return signalPassFailure();
      }
      if (failed(SymbolTable::replaceAllSymbolUses(func, StringAttr::get(&getContext(), to),
                                                   module)))
        return signalPassFailure();
      func.setName(to);
    }
  }
};

} // namespace

//===- RequestCInterfaces.cpp - a C entry point per public function -------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_REQUESTCINTERFACESPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

struct RequestCInterfacesPass
    : public mtc::codegen::impl::RequestCInterfacesPassBase<RequestCInterfacesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(&getContext()));
  }
};

} // namespace

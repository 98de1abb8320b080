//===- RedirectAllocations.cpp - temporaries allocated through the runtime ===//
//
// Rewrites every call of the C library's malloc, calloc, aligned_alloc and free (what
// finalize-memref-to-llvm makes of memref.alloc and memref.dealloc) into a call of the
// runtime's allocation function of the kernel ABI (runtime/exec/KernelABI.h:
// mtc_kernel_alloc, mtc_kernel_calloc, mtc_kernel_aligned_alloc, mtc_kernel_free) with the
// calling function's kernel context in front, so that the runtime serves each call's
// temporaries from that call's arena. A call of another C allocation function, or an
// allocation in a function without a context, is an error: the runtime would not see it.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_REDIRECTALLOCATIONSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The C library functions the runtime replaces, and their replacements.
constexpr std::pair<StringLiteral, StringLiteral> kRedirected[] = {
    {"malloc", mtc::codegen::kKernelAllocFunction},
    {"calloc", mtc::codegen::kKernelCallocFunction},
    {"aligned_alloc", mtc::codegen::kKernelAlignedAllocFunction},
    {"free", mtc::codegen::kKernelFreeFunction},
};

/// The runtime's function that replaces C library function `name`, or "" when the runtime
/// has none.
StringRef runtimeReplacement(StringRef name) {
  for (const auto &[cName, runtimeName] : kRedirected)
    if (cName == name)
      return runtimeName;
  return "";
}

bool isUnservedAllocator(StringRef name) {
  return llvm::is_contained({"realloc", "posix_memalign", "memalign", "valloc"}, name);
}

struct RedirectAllocationsPass
    : public mtc::codegen::impl::RedirectAllocationsPassBase<RedirectAllocationsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    WalkResult result = module.walk([&](LLVM::CallOp call) {
      return failed(redirect(module, call)) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();

    // The C declarations nothing calls any more.
    for (const auto &redirected : kRedirected)
      if (auto function = module.lookupSymbol<LLVM::LLVMFuncOp>(redirected.first))
        if (function.isExternal() && SymbolTable::symbolKnownUseEmpty(function, module))
          function.erase();
  }

  /// Replaces `call` by a call of the runtime's function with the caller's context in front
  /// when it calls a C allocation function; fails (with a diagnostic) on one the runtime
  /// does not provide and in a function without a context.
  LogicalResult redirect(ModuleOp module, LLVM::CallOp call) {
    std::optional<StringRef> callee = call.getCallee();
    if (!callee)
      return success();
    if (isUnservedAllocator(*callee))
      return call.emitError("the kernels call ")
             << *callee << ", which the runtime's allocator does not provide";
    if (runtimeReplacement(*callee).empty())
      return success();
    auto cFunction = module.lookupSymbol<LLVM::LLVMFuncOp>(*callee);
    if (!cFunction)
      return success();
    auto caller = call->getParentOfType<FunctionOpInterface>();
    if (!caller || caller.getNumArguments() == 0 ||
        !caller.getArgAttr(0, mtc::codegen::kKernelContextAttrName))
      return call.emitError("this ")
             << *callee << " has no kernel context to pass to the runtime (its function takes "
             << "none: run mtc-thread-kernel-context first)";
    FailureOr<LLVM::LLVMFuncOp> replacement = declareReplacement(module, cFunction);
    if (failed(replacement))
      return failure();
    SmallVector<Value> operands = {caller.getArgument(0)};
    llvm::append_range(operands, call.getArgOperands());
    OpBuilder builder(call);
    auto redirected = LLVM::CallOp::create(builder, call.getLoc(), *replacement, operands);
    call.replaceAllUsesWith(redirected.getResults());
    call.erase();
    return success();
  }

  /// The runtime's function that replaces `cFunction`, declared with the context in front
  /// (or found, when it has that type).
  FailureOr<LLVM::LLVMFuncOp> declareReplacement(ModuleOp module, LLVM::LLVMFuncOp cFunction) {
    StringRef name = runtimeReplacement(cFunction.getName());
    LLVM::LLVMFunctionType cType = cFunction.getFunctionType();
    SmallVector<Type> params = {LLVM::LLVMPointerType::get(&getContext())};
    llvm::append_range(params, cType.getParams());
    auto type = LLVM::LLVMFunctionType::get(cType.getReturnType(), params);
    Operation *existing = module.lookupSymbol(name);
    if (!existing) {
      auto declarations = OpBuilder::atBlockBegin(module.getBody());
      return LLVM::LLVMFuncOp::create(declarations, cFunction.getLoc(), name, type);
    }
    auto function = dyn_cast<LLVM::LLVMFuncOp>(existing);
    if (!function || function.getFunctionType() != type)
      return existing->emitError("'") << name << "' is the runtime's allocation function and "
                                      << "must be an llvm.func of type " << type;
    return function;
  }
};

} // namespace

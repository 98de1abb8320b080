//===- LaunchesToCalls.cpp - gpu.launch_func to mtc_gpu_launch ------------===//
//
// The host half of upstream's gpu-to-llvm (GPUToLLVMConversion.cpp lowers gpu.launch_func to
// mgpuModuleLoad/mgpuModuleGetFunction/mgpuLaunchKernel on an embedded binary), with the
// module loading left to the runtime: the plan carries the PTX and cubins, the runtime loads
// them once, and a launch names its kernel. The parameters travel as one 64-bit word each
// instead of upstream's array of pointers to a struct of the values: the runtime builds the
// pointers, so the host code needs no struct type per kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/GPU/Passes.h"

#include "runtime/exec/KernelABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_GPULAUNCHESTOCALLSPASS
#include "compiler/codegen/GPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// `value` (a kernel operand) as the i64 word the runtime passes the kernel, or null with
/// an error on `launch`.
Value toWord(OpBuilder &builder, Location loc, Value value, gpu::LaunchFuncOp launch) {
  Type i64 = builder.getI64Type();
  Type type = value.getType();
  if (auto memref = dyn_cast<MemRefType>(type)) {
    // The kernels take bare pointers (useBarePtrCallConv), which exist only for identity
    // layouts: the views they read are computed inside them.
    if (!memref.getLayout().isIdentity()) {
      launch.emitError("passes a buffer with a non-identity layout to a kernel: ") << type;
      return {};
    }
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, value);
    return arith::IndexCastUIOp::create(builder, loc, i64, address);
  }
  if (type.isIndex())
    return arith::IndexCastUIOp::create(builder, loc, i64, value);
  if (auto floatType = dyn_cast<FloatType>(type))
    value = arith::BitcastOp::create(builder, loc, builder.getIntegerType(floatType.getWidth()),
                                     value);
  auto integer = dyn_cast<IntegerType>(value.getType());
  if (!integer || integer.getWidth() > 64) {
    launch.emitError("passes a kernel a scalar that does not fit a 64-bit word: ") << type;
    return {};
  }
  if (integer.getWidth() == 64)
    return value;
  return arith::ExtUIOp::create(builder, loc, i64, value);
}

struct GPULaunchesToCallsPass
    : public mtc::codegen::impl::GPULaunchesToCallsPassBase<GPULaunchesToCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    Type pointer = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    SmallVector<Type> launchInputs = {pointer, i64, i64, i64, i64, i64, i64, pointer, i64};
    auto launchType = FunctionType::get(context, launchInputs, {});

    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp launch) { launches.push_back(launch); });
    func::FuncOp launchFunc;
    if (!launches.empty()) {
      if (Operation *existing = module.lookupSymbol(MTC_ABI_GPU_LAUNCH)) {
        existing->emitError("'" MTC_ABI_GPU_LAUNCH "' is the runtime's kernel launch");
        return signalPassFailure();
      }
      auto builder = OpBuilder::atBlockBegin(module.getBody());
      launchFunc = func::FuncOp::create(builder, module.getLoc(), MTC_ABI_GPU_LAUNCH, launchType);
      launchFunc.setPrivate();
    }

    // One string global per kernel, shared by its launches.
    SymbolTable symbols(module);
    llvm::StringMap<LLVM::GlobalOp> names;
    for (gpu::LaunchFuncOp launch : launches) {
      if (!launch.getAsyncDependencies().empty() || launch.getAsyncToken() ||
          launch.hasClusterSize() || launch.getDynamicSharedMemorySize()) {
        launch.emitError("is asynchronous, has clusters or dynamic shared memory, which the "
                         "host code does not support");
        return signalPassFailure();
      }
      Location loc = launch.getLoc();
      StringRef kernel = launch.getKernelName().getValue();
      LLVM::GlobalOp &global = names[kernel];
      if (!global) {
        // NUL-terminated: the runtime reads a C string.
        std::string text = (kernel + llvm::Twine('\0')).str();
        auto type = LLVM::LLVMArrayType::get(IntegerType::get(context, 8), text.size());
        OpBuilder detached(context);
        global = LLVM::GlobalOp::create(detached, loc, type, /*isConstant=*/true,
                                        LLVM::Linkage::Internal,
                                        ("mtc_kernel_name_" + kernel).str(),
                                        StringAttr::get(context, text));
        // Renamed if the name is taken.
        symbols.insert(global, module.getBody()->begin());
      }
      OpBuilder builder(launch);
      Value name = LLVM::AddressOfOp::create(builder, loc, global);

      ValueRange operands = launch.getKernelOperands();
      int64_t count = static_cast<int64_t>(operands.size());
      // The words live in the function's frame, allocated once at its entry: an alloca in a
      // layer loop would grow the stack every iteration.
      auto wordsType = MemRefType::get({count}, i64);
      auto function = launch->getParentOfType<func::FuncOp>();
      if (!function) {
        launch.emitError("is not in a func.func");
        return signalPassFailure();
      }
      auto entry = OpBuilder::atBlockBegin(&function.getBody().front());
      Value words = memref::AllocaOp::create(entry, loc, wordsType);
      for (auto [index, operand] : llvm::enumerate(operands)) {
        Value word = toWord(builder, loc, operand, launch);
        if (!word)
          return signalPassFailure();
        Value position = arith::ConstantIndexOp::create(builder, loc, index);
        memref::StoreOp::create(builder, loc, word, words, ValueRange{position});
      }
      Value wordsAddress = arith::IndexCastUIOp::create(
          builder, loc, i64, memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, words));
      Value wordsPointer = LLVM::IntToPtrOp::create(builder, loc, pointer, wordsAddress);

      // Launch sizes are index (or i32/i64 from other producers).
      auto asI64 = [&](Value size) -> Value {
        if (size.getType().isIndex())
          return arith::IndexCastUIOp::create(builder, loc, i64, size);
        if (size.getType() == i64)
          return size;
        return arith::ExtUIOp::create(builder, loc, i64, size);
      };
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      SmallVector<Value> arguments = {name,           asI64(grid.x),  asI64(grid.y),
                                      asI64(grid.z),  asI64(block.x), asI64(block.y),
                                      asI64(block.z), wordsPointer,
                                      arith::ConstantIntOp::create(builder, loc, count, 64)};
      func::CallOp::create(builder, loc, launchFunc, arguments);
      launch.erase();
    }

    // The kernels live in the plan's PTX, not in the host object.
    for (auto gpuModule : llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      gpuModule.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};

} // namespace

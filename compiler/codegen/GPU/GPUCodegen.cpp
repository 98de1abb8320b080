//===- GPUCodegen.cpp - linalg functions to PTX ---------------------------===//
//
// bufferize (mtc-bufferize-pipeline, shared with the CPU backend; a step comes bufferized by
// mtc-gpu-bufferize-pipeline) -> linalg to parallel
// loops -> one 1-D thread grid per op -> gpu.launch -> kernel outlining -> one gpu.module
// -> NVVM -> PTX (gpu-module-to-binary, format=isa).
// The MLIR part follows the sequence measured with mlir-opt-22 and upstream's
// gpu-lower-to-nvvm-pipeline, run through the C++ pass API. compileStepKernels keeps the host
// side of the module, its launches turned into runtime calls (see GPUCodegen.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/GPU/GPUCodegen.h"
#include "compiler/codegen/GPU/DropoutKeep.h"
#include "compiler/codegen/GPU/Passes.h"

#include "compiler/codegen/Common/DiagnosticCollector.h"
#include "compiler/codegen/Common/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/OptimizeForNVVM.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/NVVM/Utils.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mtc;
using llvm::Error;
using llvm::Expected;

#ifndef MTC_CUDA_TOOLKIT_PATH
#define MTC_CUDA_TOOLKIT_PATH ""
#endif

namespace {

Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Name of the one gpu.module holding every kernel.
constexpr llvm::StringLiteral kKernelModuleName = "mtc_kernels";

void registerGPUDialects(DialectRegistry &registry) {
  codegen::registerCodegenDialects(registry);
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  // convert-gpu-to-nvvm lowers the other dialects of a kernel through their
  // ConvertToLLVMPatternInterface.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
}

LogicalResult runPipeline(ModuleOp module, llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

/// Wraps `op` in a one-iteration `scf.parallel`: the kernel of a single thread.
void wrapInOneThread(IRRewriter &rewriter, Operation *op) {
  Location loc = op->getLoc();
  rewriter.setInsertionPoint(op);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto loop =
      scf::ParallelOp::create(rewriter, loc, ValueRange{zero}, ValueRange{one}, ValueRange{one});
  op->moveBefore(loop.getBody()->getTerminator());
}

/// Whether `loop` is a sequential loop of the host that reads or writes memory itself (a
/// scatter-add over tokens) and calls nothing: it runs as one kernel of a single thread.
bool isSerialKernel(scf::ForOp loop) {
  if (loop->getParentOfType<scf::ForOp>() || loop->getParentOfType<scf::ParallelOp>())
    return false;
  bool accessesMemory = false, calls = false;
  loop.walk([&](Operation *op) {
    accessesMemory |= isa<memref::LoadOp, memref::StoreOp>(op) &&
                      !op->getParentOfType<linalg::LinalgOp>();
    calls |= isa<func::CallOp>(op);
  });
  return accessesMemory && !calls;
}

/// Gives every linalg op its own parallel loop, so that each becomes a kernel: copies
/// become `linalg.copy`, and an op without parallel dimensions (a full reduction, a scalar)
/// is wrapped in a one-iteration `scf.parallel`, the kernel of a single thread. A serial
/// loop of the host (isSerialKernel) becomes one single-thread kernel, the linalg ops in it
/// sequential loops and its allocations hoisted before it.
LogicalResult prepareLinalgOps(ModuleOp module) {
  IRRewriter rewriter(module.getContext());
  module.walk([&](memref::CopyOp copy) {
    rewriter.setInsertionPoint(copy);
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(), copy.getTarget());
  });
  SmallVector<scf::ForOp> serialLoops;
  module.walk([&](scf::ForOp loop) {
    if (isSerialKernel(loop))
      serialLoops.push_back(loop);
  });
  for (scf::ForOp loop : serialLoops) {
    // A kernel cannot allocate (malloc is not linked into the PTX): the loop's scratch
    // buffers are allocated once before it, on the host, and reused by every iteration.
    SmallVector<memref::AllocOp> allocations;
    loop.walk([&](memref::AllocOp alloc) { allocations.push_back(alloc); });
    for (memref::AllocOp alloc : allocations) {
      if (!alloc->getOperands().empty())
        return alloc.emitError("has a dynamic size in a loop that runs as a GPU kernel");
      alloc->moveBefore(loop);
    }
    SmallVector<linalg::LinalgOp> inside;
    loop.walk([&](linalg::LinalgOp op) { inside.push_back(op); });
    for (linalg::LinalgOp op : inside) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::linalgOpToLoops(rewriter, op)))
        return op.emitError("cannot be lowered to loops in a single-thread kernel");
      rewriter.eraseOp(op);
    }
    wrapInOneThread(rewriter, loop);
  }
  SmallVector<linalg::LinalgOp> scalarOps;
  module.walk([&](linalg::LinalgOp op) {
    if (op.getNumParallelLoops() == 0)
      scalarOps.push_back(op);
  });
  for (linalg::LinalgOp op : scalarOps)
    wrapInOneThread(rewriter, op);
  return success();
}

/// Rewrites a normalised static parallel loop over (n_0, ..., n_k) into one over
/// n_0 * ... * n_k iterations whose body recovers each index by division and remainder
/// (row-major: the last index varies fastest, so consecutive threads touch consecutive
/// elements of the innermost dimension).
FailureOr<scf::ParallelOp> collapse(RewriterBase &rewriter, scf::ParallelOp loop) {
  SmallVector<int64_t> sizes;
  for (auto [lower, upper, step] :
       llvm::zip_equal(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> lb = getConstantIntValue(lower), ub = getConstantIntValue(upper),
                           st = getConstantIntValue(step);
    if (!lb || !ub || !st || *lb != 0 || *st != 1)
      return failure();
    sizes.push_back(*ub);
  }
  if (sizes.size() == 1)
    return loop;
  int64_t total = 1;
  for (int64_t size : sizes)
    total *= size;

  Location loc = loop.getLoc();
  rewriter.setInsertionPoint(loop);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value count = arith::ConstantIndexOp::create(rewriter, loc, total);
  auto collapsed = scf::ParallelOp::create(rewriter, loc, ValueRange{zero}, ValueRange{count},
                                           ValueRange{one});
  Block *body = collapsed.getBody();
  rewriter.setInsertionPointToStart(body);
  SmallVector<Value> indices(sizes.size());
  Value rest = body->getArgument(0);
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    Value size = arith::ConstantIndexOp::create(rewriter, loc, sizes[i]);
    indices[i] = i == 0 ? rest : Value(arith::RemUIOp::create(rewriter, loc, rest, size));
    if (i > 0)
      rest = arith::DivUIOp::create(rewriter, loc, rest, size);
  }
  rewriter.eraseOp(body->getTerminator());
  rewriter.mergeBlocks(loop.getBody(), body, indices);
  rewriter.eraseOp(loop);
  return collapsed;
}

/// Collapses each outermost parallel loop nest into one dimension of N iterations and tiles
/// it into blocks of min(N, blockSize) threads.
LogicalResult tileForThreads(ModuleOp module, int64_t blockSize) {
  SmallVector<scf::ParallelOp> loops;
  module.walk([&](scf::ParallelOp loop) {
    if (!loop->getParentOfType<scf::ParallelOp>())
      loops.push_back(loop);
  });
  IRRewriter rewriter(module.getContext());
  for (scf::ParallelOp loop : loops) {
    FailureOr<scf::ParallelOp> collapsed = collapse(rewriter, loop);
    if (failed(collapsed))
      return loop.emitError("expected a normalised parallel loop with static bounds");
    int64_t iterations = *getConstantIntValue(collapsed->getUpperBound()[0]);
    if (iterations == 0) {
      rewriter.eraseOp(*collapsed);
      continue;
    }
    scf::tileParallelLoop(*collapsed, {std::min(iterations, blockSize)},
                          /*noMinMaxBounds=*/true);
  }
  return success();
}

/// Every parallel loop and memory access must have become a kernel; sequential loops of
/// calls (a layer repeated) stay on the host.
LogicalResult checkAllOnDevice(ModuleOp module) {
  WalkResult result = module.walk([](func::FuncOp func) {
    return func.walk<WalkOrder::PreOrder>([](Operation *op) {
      if (isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      if (isa<scf::ParallelOp, memref::LoadOp, memref::StoreOp, linalg::LinalgOp>(op)) {
        op->emitError() << "'" << op->getName() << "' was not mapped to a GPU kernel";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
  });
  return failure(result.wasInterrupted());
}

/// Moves the views of buffers a launch uses (a layer's parameter, a slice at the loop's
/// offset of the stacked parameters) into it, so that a kernel takes whole buffers, which
/// the bare-pointer convention passes, and the offsets as scalars.
void sinkViewsIntoLaunches(ModuleOp module) {
  module.walk([](gpu::LaunchOp launch) {
    Region &body = launch.getBody();
    for (bool changed = true; changed;) {
      changed = false;
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(body, above);
      for (Value value : above) {
        Operation *view = value.getDefiningOp();
        if (!isa_and_nonnull<ViewLikeOpInterface>(view) || !isPure(view) ||
            view->getNumRegions() != 0)
          continue;
        OpBuilder builder = OpBuilder::atBlockBegin(&body.front());
        Operation *copy = builder.clone(*view);
        for (auto [old, sunk] : llvm::zip_equal(view->getResults(), copy->getResults()))
          replaceAllUsesInRegionWith(old, sunk, body);
        changed = true;
      }
    }
  });
}

/// Moves every outlined kernel into one gpu.module and names them `<func>_kernel_<i>`, in
/// the order in which each function launches them (characters PTX does not allow in a
/// name as '_'; the symbol table renames a clash).
LogicalResult mergeKernelModules(ModuleOp module) {
  MLIRContext *context = module.getContext();
  SymbolTable symbols(module);
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module.getBody());
  auto merged = gpu::GPUModuleOp::create(builder, module.getLoc(), kKernelModuleName);
  symbols.insert(merged);
  SymbolTable mergedSymbols(merged);

  SmallVector<gpu::GPUModuleOp> oldModules;
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
    if (gpuModule != merged)
      oldModules.push_back(gpuModule);

  for (auto func : module.getOps<func::FuncOp>()) {
    unsigned index = 0;
    WalkResult result = func.walk([&](gpu::LaunchFuncOp launch) {
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernelAttr());
      if (!kernel) {
        launch.emitError("launches an unknown kernel");
        return WalkResult::interrupt();
      }
      auto moved = cast<gpu::GPUFuncOp>(kernel->clone());
      // PTX names are letters, digits, '_' and '$': a layer's `block.fwd` is `block_fwd`.
      std::string name = (func.getSymName() + "_kernel_" + llvm::Twine(index++)).str();
      for (char &c : name)
        if (!llvm::isAlnum(c) && c != '_' && c != '$')
          c = '_';
      moved.setName(name);
      mergedSymbols.insert(moved);
      launch.setKernelAttr(SymbolRefAttr::get(context, kKernelModuleName,
                                              {FlatSymbolRefAttr::get(context, moved.getName())}));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
  }
  // The functions the kernels call: the dropout decision, copied by the outlining.
  for (gpu::GPUModuleOp old : oldModules) {
    for (auto callee : old.getOps<func::FuncOp>())
      if (!mergedSymbols.lookup(callee.getSymName()))
        mergedSymbols.insert(callee.clone());
    old.erase();
  }
  if (failed(codegen::defineDropoutKeep(merged)))
    return failure();
  for (auto callee : merged.getOps<func::FuncOp>())
    if (callee.isExternal())
      return callee.emitError("is called in a GPU kernel but has no definition for the GPU");
  return success();
}

std::string cudaToolkitPath(const codegen::GPUCodegenOptions &options) {
  if (!options.cudaPath.empty())
    return options.cudaPath;
  for (const char *variable : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(variable); value && *value)
      return value;
  llvm::StringRef built = MTC_CUDA_TOOLKIT_PATH;
  if (!built.empty())
    return built.str();
  return NVVM::getCUDAToolkitPath().str();
}

/// Buffers (after bufferization) to host functions launching the kernels of one
/// gpu.module named kKernelModuleName, in place.
Error outlineKernels(ModuleOp module, const codegen::GPUCodegenOptions &options,
                     const codegen::DiagnosticCollector &diagnostics) {
  if (failed(prepareLinalgOps(module)))
    return diagnostics.error("preparing linalg ops for GPU kernels failed");
  if (failed(runPipeline(module, [](OpPassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
      })))
    return diagnostics.error("lowering linalg to parallel loops failed");
  if (failed(tileForThreads(module, options.blockSize)))
    return diagnostics.error("tiling parallel loops for GPU threads failed");

  if (failed(runPipeline(module, [](OpPassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
        pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
        // Folds the launch sizes to constants (before, it would fold away the one-thread
        // loops of scalar kernels).
        pm.addNestedPass<func::FuncOp>(createLowerAffinePass());
        pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
        pm.addNestedPass<func::FuncOp>(createCSEPass());
      })) ||
      failed(checkAllOnDevice(module)))
    return diagnostics.error("mapping parallel loops to GPU kernels failed");

  sinkViewsIntoLaunches(module);
  if (failed(runPipeline(module,
                         [](OpPassManager &pm) {
                           pm.addPass(createGpuLaunchSinkIndexComputationsPass());
                           pm.addPass(createGpuKernelOutliningPass());
                         })) ||
      failed(mergeKernelModules(module)))
    return diagnostics.error("outlining GPU kernels failed");
  return Error::success();
}

/// The outlined kernels of `module` (outlineKernels' output, changed) to PTX for `chip`.
Expected<std::string> lowerKernelsToPTX(ModuleOp module, llvm::StringRef chip,
                                        const codegen::GPUCodegenOptions &options,
                                        const codegen::DiagnosticCollector &diagnostics) {
  std::string toolkit = cudaToolkitPath(options);
  if (failed(runPipeline(module, [&](OpPassManager &pm) {
        GpuNVVMAttachTargetOptions target;
        target.chip = chip.str();
        // PTX ISA 8.0: sm_90 needs at least 7.8, NVPTX's default (6.0) aborts.
        target.features = "+ptx80";
        target.optLevel = options.optLevel;
        pm.addPass(createGpuNVVMAttachTarget(target));

        OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
        kernels.addPass(createStripDebugInfoPass());
        // The views kernels compute (sinkViewsIntoLaunches) as offsets of their buffers.
        kernels.addPass(memref::createExpandStridedMetadataPass());
        kernels.addPass(createLowerAffinePass());
        kernels.addPass(createSCFToControlFlowPass());
        // f16/bf16 transcendental functions are computed in f32 (libdevice has no others).
        kernels.addPass(math::createMathExtendToSupportedTypes());
        ConvertGpuOpsToNVVMOpsOptions nvvm;
        nvvm.useBarePtrCallConv = true;
        nvvm.indexBitwidth = 64;
        kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
        kernels.addPass(LLVM::createNVVMOptimizeForTargetPass());
        kernels.addPass(createCanonicalizerPass());
        kernels.addPass(createCSEPass());
        kernels.addPass(createReconcileUnrealizedCastsPass());

        GpuModuleToBinaryPassOptions binary;
        binary.compilationTarget = "isa";
        binary.toolkitPath = toolkit;
        pm.addPass(createGpuModuleToBinaryPass(binary));
      })))
    return diagnostics.error("lowering kernels to PTX for " + chip + " failed");

  auto binary = dyn_cast_or_null<gpu::BinaryOp>(
      SymbolTable::lookupSymbolIn(module.getOperation(), kKernelModuleName));
  if (!binary || binary.getObjects().size() != 1)
    return errorf("gpu-module-to-binary produced no PTX");
  auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
  std::string ptx = object.getObject().getValue().str();
  // Math functions come from libdevice; without it they stay external and ptxas fails.
  if (llvm::StringRef(ptx).contains(".extern .func"))
    return diagnostics.error("the PTX calls functions it does not define: is libdevice in '" +
                             toolkit +
                             "/nvvm/libdevice'? (set CUDA_ROOT or GPUCodegenOptions::cudaPath)");
  return ptx;
}

/// What a launch passes in `value`: an argument of `function`, a temporary, another view,
/// or a scalar.
codegen::GPUKernelArgument describeArgument(Value value, func::FuncOp function) {
  using Kind = codegen::GPUKernelArgument::Kind;
  codegen::GPUKernelArgument described{Kind::View};
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type) {
    described.kind = Kind::Scalar;
    llvm::raw_string_ostream os(described.scalarType);
    value.getType().print(os);
    return described;
  }
  if (type.hasStaticShape())
    described.bytes = type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  if (auto argument = dyn_cast<BlockArgument>(value);
      argument && argument.getOwner() == &function.getBody().front()) {
    described.kind = Kind::Argument;
    described.argument = argument.getArgNumber();
  } else if (isa_and_nonnull<memref::AllocOp, memref::AllocaOp>(value.getDefiningOp())) {
    described.kind = Kind::Temporary;
  }
  return described;
}

/// Each host function's launches and calls.
LogicalResult describeHost(ModuleOp module, codegen::GPUStepKernels &kernels) {
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    std::vector<std::string> &calls = kernels.calls.emplace_back(function.getSymName().str(),
                                                                 std::vector<std::string>{})
                                          .second;
    WalkResult result = function.walk([&](Operation *op) {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        if (!llvm::is_contained(calls, call.getCallee()))
          calls.push_back(call.getCallee().str());
        return WalkResult::advance();
      }
      auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
      if (!launch)
        return WalkResult::advance();
      codegen::GPUKernelLaunch &described = kernels.launches.emplace_back();
      described.kernel = launch.getKernelName().str();
      described.function = function.getSymName().str();
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      Value sizes[2][3] = {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}};
      for (int d = 0; d < 3; ++d) {
        std::optional<int64_t> g = getConstantIntValue(sizes[0][d]),
                               b = getConstantIntValue(sizes[1][d]);
        if (!g || !b) {
          launch.emitError("has a launch size that is not a constant");
          return WalkResult::interrupt();
        }
        described.grid[d] = *g;
        described.block[d] = *b;
      }
      for (Value operand : launch.getKernelOperands())
        described.arguments.push_back(describeArgument(operand, function));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
  }
  return success();
}

MLIRContext *prepareContext(ModuleOp module) {
  MLIRContext *context = module.getContext();
  DialectRegistry registry;
  registerGPUDialects(registry);
  context->appendDialectRegistry(registry);
  // The steps between pass pipelines build ops of these dialects.
  context->loadDialect<arith::ArithDialect, gpu::GPUDialect, linalg::LinalgDialect,
                       scf::SCFDialect>();
  return context;
}

Error checkBlockSize(const codegen::GPUCodegenOptions &options) {
  if (options.blockSize < 1 || options.blockSize > 1024)
    return errorf("the block size must be between 1 and 1024 threads");
  return Error::success();
}

} // namespace

Error codegen::checkGPUArchitecture(llvm::StringRef chip) {
  if (llvm::is_contained(kGPUArchitectures, chip))
    return Error::success();
  return errorf("unknown CUDA architecture '" + chip + "'; expected one of " +
                llvm::join(llvm::ArrayRef(kGPUArchitectures), ", "));
}

Expected<std::string> codegen::compileToPTX(ModuleOp linalgModule, llvm::StringRef chip,
                                            const GPUCodegenOptions &options) {
  if (Error err = checkGPUArchitecture(chip))
    return std::move(err);
  if (Error err = checkBlockSize(options))
    return std::move(err);
  MLIRContext *context = prepareContext(linalgModule);
  OwningOpRef<ModuleOp> module(linalgModule.clone());
  codegen::DiagnosticCollector diagnostics(context);
  if (failed(runPipeline(*module, [](OpPassManager &pm) {
        buildBufferizePassPipeline(pm, UpdateGuard::InKernels);
      })))
    return diagnostics.error("bufferization failed");
  if (Error err = outlineKernels(*module, options, diagnostics))
    return std::move(err);
  return lowerKernelsToPTX(*module, chip, options, diagnostics);
}

Expected<codegen::GPUStepKernels>
codegen::compileStepKernels(ModuleOp buffers, llvm::ArrayRef<std::string> chips,
                            const GPUCodegenOptions &options) {
  for (const std::string &chip : chips)
    if (Error err = checkGPUArchitecture(chip))
      return std::move(err);
  if (Error err = checkBlockSize(options))
    return std::move(err);
  MLIRContext *context = prepareContext(buffers);
  OwningOpRef<ModuleOp> module(buffers.clone());
  codegen::DiagnosticCollector diagnostics(context);
  if (Error err = outlineKernels(*module, options, diagnostics))
    return std::move(err);
  GPUStepKernels kernels;
  if (failed(describeHost(*module, kernels)))
    return diagnostics.error("describing the kernel launches failed");
  kernels.host = module->clone();
  if (failed(runPipeline(*kernels.host, [](OpPassManager &pm) {
        pm.addPass(createGPULaunchesToCallsPass());
      })))
    return diagnostics.error("turning the kernel launches into runtime calls failed");
  for (const std::string &chip : chips) {
    OwningOpRef<ModuleOp> forChip(module->clone());
    Expected<std::string> ptx = lowerKernelsToPTX(*forChip, chip, options, diagnostics);
    if (!ptx)
      return ptx.takeError();
    kernels.ptx.emplace_back(chip, std::move(*ptx));
  }
  return kernels;
}

std::string codegen::findPtxas(const GPUCodegenOptions &options) {
  llvm::SmallString<256> inToolkit(cudaToolkitPath(options));
  if (!inToolkit.empty()) {
    llvm::sys::path::append(inToolkit, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(inToolkit))
      return inToolkit.str().str();
  }
  if (llvm::ErrorOr<std::string> onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  return "";
}

Expected<std::string> codegen::assembleCubin(llvm::StringRef ptx, llvm::StringRef chip,
                                             llvm::StringRef ptxas) {
  llvm::SmallString<128> ptxPath, cubinPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("mtc-kernels", "ptx", ptxPath))
    return errorf("cannot create a temporary file: " + ec.message());
  llvm::scope_exit removePtx([&] { llvm::sys::fs::remove(ptxPath); });
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("mtc-kernels", "cubin", cubinPath))
    return errorf("cannot create a temporary file: " + ec.message());
  llvm::scope_exit removeCubin([&] { llvm::sys::fs::remove(cubinPath); });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec)
      return errorf("cannot write " + ptxPath + ": " + ec.message());
    os << ptx;
  }
  std::string message;
  llvm::StringRef args[] = {ptxas, "-arch", chip, ptxPath, "-o", cubinPath};
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, /*Env=*/std::nullopt, /*Redirects=*/{},
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0, &message);
  if (rc != 0)
    return errorf(ptxas + " failed to assemble the PTX for " + chip +
                  (message.empty() ? llvm::Twine("") : ": " + message) + " (exit status " +
                  llvm::Twine(rc) + ")");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> cubin =
      llvm::MemoryBuffer::getFile(cubinPath);
  if (!cubin)
    return errorf("cannot read the cubin " + cubinPath + ": " + cubin.getError().message());
  return (*cubin)->getBuffer().str();
}

//===- CPUCodegen.cpp - linalg functions to an x86 shared object ----------===//
//
// bufferize -> linalg to loops -> LLVM dialect -> LLVM IR -> O3 -> object file (host
// TargetMachine, PIC) -> shared object (system linker). The MLIR part is the pass sequence
// measured with mlir-opt (docs/architecture.md, "Codegen"), run here through the C++ pass
// API; only the link is a subprocess, as LLVM offers no in-process linker API here.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPUCodegen.h"
#include "compiler/codegen/MTToLinalg.h"
#include "compiler/codegen/Passes.h"
#include "compiler/codegen/Workspace.h"
#include "compiler/fusion/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using namespace mtc;
using llvm::Error;
using llvm::Expected;

static Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Shared by both backends
//===----------------------------------------------------------------------===//

void codegen::registerCodegenDialects(DialectRegistry &registry) {
  registry.insert<affine::AffineDialect, arith::ArithDialect, bufferization::BufferizationDialect,
                  cf::ControlFlowDialect, func::FuncDialect, linalg::LinalgDialect,
                  LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  // scf.for with tensor iter_args (embedding_grad, repeat).
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  // Ownership-based deallocation.
  memref::registerAllocationOpInterfaceExternalModels(registry);
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

/// Gives every result of every function its own value: a value returned more than once
/// is copied into a fresh tensor for each further position (buffer-results-to-out-params
/// cannot hoist one buffer into two out-parameters).
static void copyRepeatedResults(ModuleOp module) {
  OpBuilder builder(module.getContext());
  module.walk([&](func::ReturnOp ret) {
    llvm::SmallPtrSet<Value, 4> seen;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || seen.insert(value).second)
        continue;
      builder.setInsertionPoint(ret);
      Value empty = tensor::EmptyOp::create(builder, ret.getLoc(), type.getShape(),
                                            type.getElementType());
      operand.set(linalg::CopyOp::create(builder, ret.getLoc(), value, empty).getResult(0));
    }
  });
}

LogicalResult codegen::bufferizeForCodegen(ModuleOp module) {
  module.getContext()->loadDialect<linalg::LinalgDialect, tensor::TensorDialect>();
  copyRepeatedResults(module);
  PassManager pm(module.getContext());
  pm.addPass(fusion::createFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.unknownTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  // A layer called in an scf.for (mt.repeat) returns fresh buffers for the carried values.
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
  return pm.run(module);
}

namespace {

/// Collects the diagnostics of a pass pipeline run, to return them as an llvm::Error.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag << "\n";
          for (const Diagnostic &note : diag.getNotes())
            os << note.getLocation() << ": note: " << note << "\n";
          return success();
        }) {}
  Error error(const llvm::Twine &what) const { return errorf(what + ":\n" + text); }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

/// Erases the declarations of the `mt` dialect left at module level (parameters, optimizer
/// state): they are not code, and their verifiers would look for the layer functions the
/// LLVM lowering replaces.
void eraseModuleLevelDeclarations(ModuleOp module) {
  for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
    if (op.getDialect() && op.getDialect()->getNamespace() == "mt")
      op.erase();
}

/// Copies between strided views (rows of a tensor that are not contiguous, from slices)
/// become `linalg.copy` loops: `memref.copy` would lower them to a call of the MLIR runner
/// library's `memrefCopy`, which the shared object does not link. Contiguous copies stay
/// `memref.copy` (a memcpy).
void expandStridedCopies(ModuleOp module) {
  IRRewriter rewriter(module.getContext());
  module.walk([&](memref::CopyOp copy) {
    auto identity = [](Value value) {
      auto type = dyn_cast<MemRefType>(value.getType());
      return type && type.getLayout().isIdentity();
    };
    if (identity(copy.getSource()) && identity(copy.getTarget()))
      return;
    rewriter.setInsertionPoint(copy);
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(), copy.getTarget());
  });
}

/// Replaces every f32 `linalg.batch_matmul` on buffers with a call of the external
/// kBatchMatmulF32Function (see CPUCodegen.h), declared on first use with a C interface.
/// The operands are cast to fully dynamic strided memrefs, so that one declaration serves
/// every shape and layout. Other element types, and products with their own indexing maps
/// (transposed or broadcast operands), stay linalg and become loops.
LogicalResult callBatchMatmulLibrary(ModuleOp module) {
  SmallVector<linalg::BatchMatmulOp> matmuls;
  module.walk([&](linalg::BatchMatmulOp op) {
    if (op.hasPureBufferSemantics() && !op.hasUserDefinedMaps() &&
        llvm::all_of(op->getOperandTypes(), [](Type type) {
          return cast<MemRefType>(type).getElementType().isF32();
        }))
      matmuls.push_back(op);
  });
  if (matmuls.empty())
    return success();

  MLIRContext *context = module.getContext();
  Type operandType = MemRefType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic},
      Float32Type::get(context),
      StridedLayoutAttr::get(context, ShapedType::kDynamic,
                             {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}));
  FunctionType type = FunctionType::get(context, {operandType, operandType, operandType}, {});
  if (Operation *existing = module.lookupSymbol(codegen::kBatchMatmulF32Function)) {
    auto func = dyn_cast<func::FuncOp>(existing);
    if (!func || !func.isExternal() || func.getFunctionType() != type)
      return existing->emitOpError()
             << "'" << codegen::kBatchMatmulF32Function
             << "' is reserved for the f32 batched matrix product: it must be an external "
                "function of type "
             << type;
  } else {
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    auto func = func::FuncOp::create(builder, module.getLoc(),
                                     codegen::kBatchMatmulF32Function, type);
    func.setPrivate();
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(context));
  }

  IRRewriter rewriter(context);
  for (linalg::BatchMatmulOp op : matmuls) {
    rewriter.setInsertionPoint(op);
    SmallVector<Value> operands = llvm::map_to_vector(op->getOperands(), [&](Value operand) {
      return Value(memref::CastOp::create(rewriter, op.getLoc(), operandType, operand));
    });
    rewriter.replaceOpWithNewOp<func::CallOp>(op, codegen::kBatchMatmulF32Function,
                                              TypeRange{}, operands);
  }
  return success();
}

/// Marks every public function with a body to get a `_mlir_ciface_` wrapper.
void requestCInterfaces(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(module.getContext()));
}

/// The module the backend lowers to LLVM, in place: bufferized, the f32 GEMMs calls into the
/// library, every allocation paired with its deallocation. Diagnostics go to the context.
LogicalResult prepareForLowering(ModuleOp module) {
  eraseModuleLevelDeclarations(module);
  requestCInterfaces(module);
  if (failed(codegen::bufferizeForCodegen(module)))
    return failure();
  PassManager views(module.getContext());
  views.addPass(codegen::createGemmOperandViewsPass());
  if (failed(views.run(module)))
    return failure();
  expandStridedCopies(module);
  if (failed(callBatchMatmulLibrary(module)))
    return failure();
  PassManager pm(module.getContext());
  bufferization::buildBufferDeallocationPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  codegen::moveDeallocationsToLastUse(module);
  return success();
}

/// Linalg on memrefs, deallocations placed -> LLVM dialect, the sequence measured with
/// mlir-opt-22.
void buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(codegen::createReductionLoopOrderPass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // Views (subview, expand_shape, collapse_shape, from slices and reshapes) become
  // reinterpret_casts with explicit strides, which finalize-memref-to-llvm lowers.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // f16/bf16 transcendental functions are computed in f32.
  pm.addPass(math::createMathExtendToSupportedTypes());
  pm.addPass(codegen::createApproximateMathPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

Expected<std::unique_ptr<llvm::TargetMachine>>
createHostTargetMachine(const codegen::CPUCodegenOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return errorf("no LLVM target for " + triple.str() + ": " + error);
  std::string cpu = options.cpu;
  llvm::SubtargetFeatures features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      features.AddFeature(feature.getKey(), feature.getValue());
  }
  llvm::CodeGenOptLevel level = options.optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
                                : options.optLevel == 2 ? llvm::CodeGenOptLevel::Default
                                : options.optLevel == 1 ? llvm::CodeGenOptLevel::Less
                                                        : llvm::CodeGenOptLevel::None;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features.getString(), llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, level));
  if (!machine)
    return errorf("cannot create a target machine for " + triple.str() + " (cpu " + cpu + ")");
  return machine;
}

/// The LLVM module-level O<level> pipeline, with the target's cost model (vectorisation).
void optimize(llvm::Module &module, llvm::TargetMachine &machine, unsigned optLevel) {
  if (optLevel == 0)
    return;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = optLevel >= 2;
  tuning.SLPVectorization = optLevel >= 2;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  llvm::OptimizationLevel level = optLevel >= 3   ? llvm::OptimizationLevel::O3
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O1;
  builder.buildPerModuleDefaultPipeline(level).run(module, modules);
}

/// A temporary file removed when this goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

Error createTempFile(llvm::StringRef prefix, llvm::StringRef suffix, TempFile &file) {
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(prefix, suffix, file.path))
    return errorf("cannot create a temporary file: " + ec.message());
  return Error::success();
}

/// Links the object `objectPath` into the shared object `outputPath`.
Error link(llvm::StringRef objectPath, llvm::StringRef outputPath,
           const codegen::CPUCodegenOptions &options) {
  SmallVector<std::string> candidates;
  if (!options.linker.empty())
    candidates.push_back(options.linker);
  else
    candidates = {"cc", "ld.lld-22", "ld.lld"};
  std::string program;
  for (const std::string &name : candidates) {
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name)) {
      program = *found;
      break;
    }
  }
  if (program.empty())
    return errorf("no linker found (looked for " + llvm::join(candidates, ", ") +
                  " on PATH): cannot build a shared object");
  bool isLld = llvm::StringRef(program).contains("ld.lld");
  SmallVector<llvm::StringRef> args{program, "-shared", "-o", outputPath, objectPath,
                                    MTC_CLANG_RT_BUILTINS};
  // The object's calls of its own functions bind inside it: a model function named like a
  // C library function (`pow`, `exp`) is not interposed by the one the process loaded first.
  args.push_back(isLld ? "-Bsymbolic" : "-Wl,-Bsymbolic");
  // A compiler driver finds libm itself; bare lld leaves it to the loading process.
  if (!isLld)
    args.push_back("-lm");

  TempFile log;
  if (Error error = createTempFile("mtc-link", "log", log))
    return error;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(), log.path.str()};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/0, /*MemoryLimit=*/0, &message);
  if (status != 0) {
    std::string output;
    if (auto buffer = llvm::MemoryBuffer::getFile(log.path))
      output = (*buffer)->getBuffer().str();
    return errorf("linking " + outputPath + " with " + program + " failed (status " +
                  llvm::Twine(status) + ") " + message + "\n" + output);
  }
  return Error::success();
}

/// Adds `_mtc_packed_f(void **descriptors)` for every `_mlir_ciface_f` whose parameters are
/// all descriptor pointers (the only kind the C interface of tensor functions has).
void addPackedEntryPoints(llvm::Module &module) {
  constexpr llvm::StringLiteral cInterfacePrefix = "_mlir_ciface_";
  llvm::LLVMContext &context = module.getContext();
  llvm::PointerType *ptr = llvm::PointerType::getUnqual(context);
  SmallVector<llvm::Function *> cInterfaces;
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.getName().starts_with(cInterfacePrefix) &&
        llvm::all_of(function.args(), [](llvm::Argument &a) { return a.getType()->isPointerTy(); }))
      cInterfaces.push_back(&function);
  for (llvm::Function *callee : cInterfaces) {
    std::string name =
        (codegen::kPackedEntryPrefix + callee->getName().drop_front(cInterfacePrefix.size())).str();
    auto *packed = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, /*isVarArg=*/false),
        llvm::GlobalValue::ExternalLinkage, name, module);
    llvm::IRBuilder<> builder(llvm::BasicBlock::Create(context, "entry", packed));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0, e = callee->arg_size(); i < e; ++i) {
      llvm::Value *slot = builder.CreateConstInBoundsGEP1_64(ptr, packed->getArg(0), i);
      args.push_back(builder.CreateLoad(ptr, slot));
    }
    builder.CreateCall(callee, args);
    builder.CreateRetVoid();
  }
}

/// Links the bitcode of DropoutKeep.c into `module` when the kernels call
/// kDropoutKeepFunction, as an internal always-inlined function compiled for the kernels'
/// target (its own target attributes are dropped), so that the dropout loops vectorise.
Error linkDropoutKeep(llvm::Module &module) {
  if (!module.getFunction(codegen::lowering::kDropoutKeepFunction))
    return Error::success();
  static const unsigned char bitcode[] = {
#include "compiler/codegen/DropoutKeepBitcode.inc"
  };
  llvm::MemoryBufferRef buffer(
      llvm::StringRef(reinterpret_cast<const char *>(bitcode), sizeof(bitcode)), "DropoutKeep.bc");
  Expected<std::unique_ptr<llvm::Module>> library =
      llvm::parseBitcodeFile(buffer, module.getContext());
  if (!library)
    return library.takeError();
  (*library)->setTargetTriple(module.getTargetTriple());
  (*library)->setDataLayout(module.getDataLayout());
  for (llvm::Function &function : **library)
    for (llvm::StringRef attribute : {"target-cpu", "target-features", "tune-cpu"})
      function.removeFnAttr(attribute);
  if (llvm::Linker::linkModules(module, std::move(*library), llvm::Linker::LinkOnlyNeeded))
    return errorf("linking the dropout decision's bitcode into the kernels failed");
  llvm::Function *keep = module.getFunction(codegen::lowering::kDropoutKeepFunction);
  if (!keep || keep->isDeclaration())
    return errorf("the dropout decision's bitcode does not define " +
                  codegen::lowering::kDropoutKeepFunction);
  keep->setLinkage(llvm::GlobalValue::InternalLinkage);
  keep->addFnAttr(llvm::Attribute::AlwaysInline);
  return Error::success();
}

/// Renames the object's calls of the C library's allocation functions to the runtime's
/// (see CPUCodegen.h). After LLVM's optimisations, which know the C functions (they remove
/// unused allocations and turn malloc + memset into calloc) and not the runtime's.
Error redirectAllocations(llvm::Module &module) {
  static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> renames[] = {
      {"malloc", codegen::kKernelAllocFunction},
      {"calloc", codegen::kKernelCallocFunction},
      {"aligned_alloc", codegen::kKernelAlignedAllocFunction},
      {"free", codegen::kKernelFreeFunction}};
  for (llvm::StringRef other : {"realloc", "posix_memalign", "memalign", "valloc"})
    if (llvm::Function *function = module.getFunction(other); function && !function->use_empty())
      return errorf("the kernels call " + other +
                    ", which the runtime's allocator does not provide");
  for (auto [from, to] : renames) {
    llvm::Function *function = module.getFunction(from);
    if (!function)
      continue;
    llvm::FunctionCallee replacement =
        module.getOrInsertFunction(to, function->getFunctionType(), function->getAttributes());
    function->replaceAllUsesWith(replacement.getCallee());
    function->eraseFromParent();
  }
  return Error::success();
}

} // namespace

FailureOr<SmallVector<codegen::KernelMemoryPlan>>
codegen::planKernelMemory(ModuleOp linalgModule, ArrayRef<StringRef> functions) {
  MLIRContext *context = linalgModule.getContext();
  DialectRegistry registry;
  registerCodegenDialects(registry);
  context->appendDialectRegistry(registry);
  OwningOpRef<ModuleOp> module(linalgModule.clone());
  if (failed(prepareForLowering(*module)))
    return failure();
  SmallVector<KernelMemoryPlan> plans;
  for (StringRef name : functions) {
    auto func = module->lookupSymbol<func::FuncOp>(name);
    if (!func)
      return linalgModule.emitError("no function '") << name << "' to plan the memory of";
    FailureOr<SimulatedCall> call = simulateTemporaries(*module, func);
    if (failed(call))
      return failure();
    ArenaPlan arena = planArena(call->allocations);
    KernelMemoryPlan &plan = plans.emplace_back();
    plan.function = name.str();
    plan.arenaBytes = arena.bytes;
    plan.peakBytes = call->peakBytes;
    plan.sizes = llvm::map_to_vector(call->allocations,
                                     [](const TracedAllocation &a) { return a.bytes; });
    plan.offsets = std::move(arena.offsets);
  }
  return plans;
}

Expected<std::string> codegen::compileToObject(ModuleOp linalgModule,
                                               const CPUCodegenOptions &options) {
  MLIRContext *context = linalgModule.getContext();
  DialectRegistry registry;
  registerCodegenDialects(registry);
  context->appendDialectRegistry(registry);

  OwningOpRef<ModuleOp> module(linalgModule.clone());
  {
    DiagnosticCollector diagnostics(context);
    if (failed(prepareForLowering(*module)))
      return diagnostics.error("bufferization failed");
    PassManager pm(context);
    buildLowerToLLVMPipeline(pm);
    if (failed(pm.run(*module)))
      return diagnostics.error("lowering to the LLVM dialect failed");
  }

  Expected<std::unique_ptr<llvm::TargetMachine>> machine = createHostTargetMachine(options);
  if (!machine)
    return machine.takeError();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule;
  {
    DiagnosticCollector diagnostics(context);
    llvmModule = translateModuleToLLVMIR(*module, llvmContext, "mtc_kernels");
    if (!llvmModule)
      return diagnostics.error("translation to LLVM IR failed");
  }
  addPackedEntryPoints(*llvmModule);
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  llvmModule->setDataLayout((*machine)->createDataLayout());
  if (Error error = linkDropoutKeep(*llvmModule))
    return error;
  optimize(*llvmModule, **machine, options.optLevel);
  if (Error error = redirectAllocations(*llvmModule))
    return error;

  std::string object;
  {
    llvm::raw_string_ostream os(object);
    llvm::buffer_ostream buffered(os);
    llvm::legacy::PassManager codegenPasses;
    if ((*machine)->addPassesToEmitFile(codegenPasses, buffered, nullptr,
                                        llvm::CodeGenFileType::ObjectFile))
      return errorf("the target machine cannot emit object files");
    codegenPasses.run(*llvmModule);
  }
  return object;
}

Error codegen::compileToSharedObject(ModuleOp linalgModule, llvm::StringRef outputPath,
                                     const CPUCodegenOptions &options) {
  Expected<std::string> object = compileToObject(linalgModule, options);
  if (!object)
    return object.takeError();
  TempFile objectFile;
  if (Error error = createTempFile("mtc-kernels", "o", objectFile))
    return error;
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objectFile.path, ec);
    if (ec)
      return errorf("cannot write " + objectFile.path + ": " + ec.message());
    os << *object;
  }
  return link(objectFile.path, outputPath, options);
}

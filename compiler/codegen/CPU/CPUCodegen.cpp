//===- CPUCodegen.cpp - linalg functions to an x86 shared object ----------===//
//
// The part of the CPU backend after the LLVM dialect (mtc-cpu-pipeline's output): LLVM IR
// -> packed entry points and the context version -> the allocation functions described ->
// the dropout decision's bitcode linked in -> cut into parts (ModulePartition.h) -> each part
// on its own thread: O2 -> object file (host TargetMachine, PIC) -> one shared object
// (system linker). These steps work on LLVM IR, not MLIR, so they are functions here
// rather than passes. Only the link is a subprocess, as LLVM offers no in-process linker API here.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/ModulePartition.h"
#include "compiler/codegen/Common/DiagnosticCollector.h"
#include "compiler/codegen/Common/Passes.h"
#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
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

namespace {

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

/// Links the objects `objectPaths` into the shared object `outputPath`.
Error link(llvm::ArrayRef<llvm::StringRef> objectPaths, llvm::StringRef outputPath,
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
  SmallVector<llvm::StringRef> args{program, "-shared", "-o", outputPath};
  llvm::append_range(args, objectPaths);
  args.push_back(MTC_CLANG_RT_BUILTINS);
  // The object's calls of its own functions bind inside it: a model function named like a
  // C library function (`pow`, `exp`) is not interposed by the one the process loaded first.
  args.push_back(isLld ? "-Bsymbolic" : "-Wl,-Bsymbolic");
  // The parallel loops call LLVM's OpenMP runtime: the object needs it, from the directory
  // it was found in at build time (a process that already loaded a libomp reuses it).
  std::string ompDirectory = llvm::sys::path::parent_path(MTC_LIBOMP).str();
  std::string runPath = (isLld ? "-rpath=" : "-Wl,-rpath,") + ompDirectory;
  args.push_back(MTC_LIBOMP);
  args.push_back(runPath);
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

/// Adds `_mtc_packed_f(MtcKernelContext *context, void **descriptors)` for every
/// `_mlir_ciface_f` whose parameters are all pointers (the context, then descriptors: the
/// only kind the C interface of tensor functions has), and the exported
/// `mtc_kernel_context_version`.
void addExports(llvm::Module &module) {
  llvm::LLVMContext &context = module.getContext();
  llvm::PointerType *ptr = llvm::PointerType::getUnqual(context);
  SmallVector<llvm::Function *> cInterfaces;
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.getName().starts_with(codegen::kCInterfacePrefix) &&
        function.arg_size() >= 1 &&
        llvm::all_of(function.args(), [](llvm::Argument &a) { return a.getType()->isPointerTy(); }))
      cInterfaces.push_back(&function);
  for (llvm::Function *callee : cInterfaces) {
    StringRef function = callee->getName().drop_front(codegen::kCInterfacePrefix.size());
    std::string name = (codegen::kPackedEntryPrefix + function).str();
    auto *packed = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, ptr}, /*isVarArg=*/false),
        llvm::GlobalValue::ExternalLinkage, name, module);
    llvm::IRBuilder<> builder(llvm::BasicBlock::Create(context, "entry", packed));
    SmallVector<llvm::Value *> args = {packed->getArg(0)};
    for (unsigned i = 0, e = callee->arg_size() - 1; i < e; ++i) {
      llvm::Value *slot = builder.CreateConstInBoundsGEP1_64(ptr, packed->getArg(1), i);
      args.push_back(builder.CreateLoad(ptr, slot));
    }
    builder.CreateCall(callee, args);
    builder.CreateRetVoid();
  }
  llvm::Type *u32 = llvm::Type::getInt32Ty(context);
  new llvm::GlobalVariable(module, u32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(u32, MTC_KERNEL_CONTEXT_VERSION),
                           codegen::kKernelContextVersionSymbol);
}

/// Links the bitcode of DropoutKeep.c into `module` when the kernels call
/// kDropoutKeepFunction, as an internal always-inlined function compiled for the kernels'
/// target (its own target attributes are dropped), so that the dropout loops vectorise.
Error linkDropoutKeep(llvm::Module &module) {
  if (!module.getFunction(codegen::lowering::kDropoutKeepFunction))
    return Error::success();
  static const unsigned char bitcode[] = {
#include "compiler/codegen/CPU/DropoutKeepBitcode.inc"
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

/// Tells LLVM that the runtime's allocation functions (mtc-redirect-allocations' calls) are
/// an allocator like the C library's, with the context as an extra first parameter: a new
/// block aliases nothing, and an allocation nothing uses is removed with its free, as LLVM
/// does for malloc. They read the context and update the runtime's state behind it, which
/// is not the kernels' memory; so do the workspace's functions.
void describeAllocationFunctions(llvm::Module &module) {
  llvm::LLVMContext &context = module.getContext();
  auto describe = [&](llvm::StringRef name, llvm::AllocFnKind kind,
                      llvm::MemoryEffects memory) -> llvm::Function * {
    llvm::Function *function = module.getFunction(name);
    if (!function)
      return nullptr;
    function->addFnAttr(llvm::Attribute::getWithAllocKind(context, kind));
    function->addFnAttr("alloc-family", "mtc_kernel");
    function->addFnAttr(llvm::Attribute::NoUnwind);
    function->addFnAttr(llvm::Attribute::WillReturn);
    function->setMemoryEffects(memory);
    return function;
  };
  using Kind = llvm::AllocFnKind;
  auto allocation = llvm::MemoryEffects::inaccessibleOrArgMemOnly();
  // Parameter 0 is the context: the sizes and the alignment follow it.
  if (llvm::Function *f =
          describe(codegen::kKernelAllocFunction, Kind::Alloc | Kind::Uninitialized, allocation)) {
    f->addRetAttr(llvm::Attribute::NoAlias);
    f->addFnAttr(llvm::Attribute::getWithAllocSizeArgs(context, 1, std::nullopt));
  }
  if (llvm::Function *f =
          describe(codegen::kKernelCallocFunction, Kind::Alloc | Kind::Zeroed, allocation)) {
    f->addRetAttr(llvm::Attribute::NoAlias);
    f->addFnAttr(llvm::Attribute::getWithAllocSizeArgs(context, 2, 1));
  }
  if (llvm::Function *f = describe(codegen::kKernelAlignedAllocFunction,
                                   Kind::Alloc | Kind::Uninitialized | Kind::Aligned, allocation)) {
    f->addRetAttr(llvm::Attribute::NoAlias);
    f->addParamAttr(1, llvm::Attribute::AllocAlign);
    f->addFnAttr(llvm::Attribute::getWithAllocSizeArgs(context, 2, std::nullopt));
  }
  if (llvm::Function *f = describe(codegen::kKernelFreeFunction, Kind::Free, allocation))
    f->addParamAttr(1, llvm::Attribute::AllocatedPointer);
  // The workspace (mtc-workspace-views) is no new block: the caller's views may lie in it,
  // so its pointer is not noalias; it is 64-byte aligned, which the views' offsets keep.
  for (llvm::StringRef name :
       {codegen::kKernelWorkspaceFunction, codegen::kKernelWorkspaceReleaseFunction})
    if (llvm::Function *f = module.getFunction(name)) {
      f->addFnAttr(llvm::Attribute::NoUnwind);
      f->addFnAttr(llvm::Attribute::WillReturn);
      f->setMemoryEffects(allocation);
      if (!f->getReturnType()->isVoidTy())
        f->addRetAttr(llvm::Attribute::getWithAlignment(context, llvm::Align(64)));
    }
}

} // namespace

namespace {

/// The step's LLVM IR ready for optimisation: translated, with the packed entry points and
/// the context version (addExports), the allocation functions described, the target's triple
/// and data layout, and the dropout decision linked in.
Expected<std::unique_ptr<llvm::Module>> translateKernels(ModuleOp llvmDialectModule,
                                                         llvm::LLVMContext &llvmContext,
                                                         llvm::TargetMachine &machine) {
  MLIRContext *context = llvmDialectModule.getContext();
  DialectRegistry registry;
  codegen::registerCodegenDialects(registry);
  registerOpenMPDialectTranslation(registry);
  context->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> llvmModule;
  {
    codegen::DiagnosticCollector diagnostics(context);
    llvmModule = translateModuleToLLVMIR(llvmDialectModule, llvmContext, "mtc_kernels");
    if (!llvmModule)
      return diagnostics.error("translation to LLVM IR failed");
  }
  addExports(*llvmModule);
  describeAllocationFunctions(*llvmModule);
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  if (Error error = linkDropoutKeep(*llvmModule))
    return std::move(error);
  return llvmModule;
}

/// `module` optimised at `optLevel` and emitted as an object file.
Expected<std::string> optimizeAndEmit(llvm::Module &module, llvm::TargetMachine &machine,
                                      unsigned optLevel) {
  optimize(module, machine, optLevel);
  std::string object;
  {
    // The buffer reaches `object` when it is destroyed, before `object` is returned.
    llvm::raw_string_ostream os(object);
    llvm::buffer_ostream buffered(os);
    llvm::legacy::PassManager codegenPasses;
    if (machine.addPassesToEmitFile(codegenPasses, buffered, nullptr,
                                    llvm::CodeGenFileType::ObjectFile))
      return errorf("the target machine cannot emit object files");
    codegenPasses.run(module);
  }
  return object;
}

/// Optimises and emits each part (partitionModule) on its own thread: an LLVMContext is not
/// shared between threads, so each part travels as bitcode into a context of its own, with
/// a target machine of its own. The objects come back in the parts' order.
Expected<std::vector<std::string>>
compileParts(llvm::ArrayRef<std::unique_ptr<llvm::Module>> parts,
             const codegen::CPUCodegenOptions &options) {
  std::vector<llvm::SmallString<0>> bitcode(parts.size());
  for (auto [part, buffer] : llvm::zip_equal(parts, bitcode)) {
    llvm::raw_svector_ostream os(buffer);
    llvm::WriteBitcodeToFile(*part, os);
  }
  std::vector<std::string> objects(parts.size());
  std::vector<std::string> failures(parts.size());
  llvm::DefaultThreadPool pool(llvm::hardware_concurrency(options.threads));
  for (size_t i = 0; i < parts.size(); ++i)
    pool.async([&, i] {
      llvm::LLVMContext context;
      auto failed = [&](Error error) { failures[i] = llvm::toString(std::move(error)); };
      Expected<std::unique_ptr<llvm::Module>> module = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(bitcode[i].str(), "mtc-kernels-part"), context);
      if (!module)
        return failed(module.takeError());
      Expected<std::unique_ptr<llvm::TargetMachine>> machine = createHostTargetMachine(options);
      if (!machine)
        return failed(machine.takeError());
      Expected<std::string> object = optimizeAndEmit(**module, **machine, options.optLevel);
      if (!object)
        return failed(object.takeError());
      objects[i] = std::move(*object);
    });
  pool.wait();
  for (const std::string &failure : failures)
    if (!failure.empty())
      return errorf(failure);
  return objects;
}

} // namespace

Expected<std::string> codegen::compileToObject(ModuleOp llvmDialectModule,
                                               const CPUCodegenOptions &options) {
  CPUCodegenOptions whole = options;
  whole.parts = 1;
  Expected<std::vector<std::string>> objects = compileToObjects(llvmDialectModule, whole);
  if (!objects)
    return objects.takeError();
  return std::move(objects->front());
}

Expected<std::vector<std::string>> codegen::compileToObjects(ModuleOp llvmDialectModule,
                                                             const CPUCodegenOptions &options) {
  // The target machine is created here first: it initialises LLVM's native target once,
  // before any thread does.
  Expected<std::unique_ptr<llvm::TargetMachine>> machine = createHostTargetMachine(options);
  if (!machine)
    return machine.takeError();
  llvm::LLVMContext llvmContext;
  Expected<std::unique_ptr<llvm::Module>> module =
      translateKernels(llvmDialectModule, llvmContext, **machine);
  if (!module)
    return module.takeError();
  return compileParts(partitionModule(**module, std::max(1u, options.parts)), options);
}

Error codegen::compileToSharedObject(ModuleOp llvmDialectModule, llvm::StringRef outputPath,
                                     const CPUCodegenOptions &options) {
  Expected<std::vector<std::string>> objects = compileToObjects(llvmDialectModule, options);
  if (!objects)
    return objects.takeError();
  std::vector<TempFile> objectFiles(objects->size());
  for (auto [object, file] : llvm::zip_equal(*objects, objectFiles)) {
    if (Error error = createTempFile("mtc-kernels", "o", file))
      return error;
    std::error_code ec;
    llvm::raw_fd_ostream os(file.path, ec);
    if (ec)
      return errorf("cannot write " + file.path + ": " + ec.message());
    os << object;
    os.close();
    if (os.has_error())
      return errorf("cannot write " + file.path + ": " + os.error().message());
  }
  SmallVector<llvm::StringRef> objectPaths;
  for (const TempFile &file : objectFiles)
    objectPaths.push_back(file.path);
  return link(objectPaths, outputPath, options);
}

//===- GPUCodegen.h - linalg functions to PTX -------------------*- C++ -*-===//
//
// The GPU backend: a module of `func.func`s on builtin tensors (mt-to-linalg's output) to
// one PTX module for an NVIDIA architecture, in-process through LLVM's NVPTX backend.
//
// What the PTX holds. Each linalg op of function `@f` becomes one kernel
// `f_kernel_<i>` (i counts f's kernels in program order). A kernel's parameters are bare
// pointers to the row-major buffers it reads and writes (no memref descriptors, no
// scalars: constants and index computations are sunk into the kernel). The parallel
// dimensions of an op are collapsed into one and tiled by up to `blockSize` threads per
// block along x, so the launch is grid (ceil(N / blockSize), 1, 1) and block
// (min(N, blockSize), 1, 1) for N output elements; reductions run sequentially inside each
// thread. Every kernel carries its block size as `.maxntid` in the PTX.
//
// A training step (compileStepKernels) compiles the same way from its buffers. Its host
// side is described (each function's launches: kernel, grid, block, the buffers passed; the
// functions it calls: GEMMs, collectives, the layers) and kept as code.
//
// Host code. After outlining, each host function's gpu.launch_func ops become calls of the
// runtime's mtc_gpu_launch (mtc-gpu-launches-to-calls, the host half of upstream's
// gpu-to-llvm with the kernels named instead of embedded) and the kernel modules are
// dropped: what remains (GPUStepKernels::host) is host code on buffers that the CPU
// backend's lowering compiles (mtc-gpu-host-to-llvm-pipeline) into an x86 shared object
// with the x86 object's entry points and context version (CPUCodegen.h). Its temporaries
// are freed after their last uses (mtc-gpu-host-deallocation-pipeline, on this host code:
// before outlining, the lowered frees would be host loads and stores among the loops mapped
// to kernels) and placed in the workspace, which is device memory, and it reaches the
// runtime through the GPU section of runtime/exec/KernelABI.h (mtc_gpu_launch,
// mtc_gpu_workspace, mtc_gpu_batch_matmul_f32). None of it has run on a GPU yet
// (docs/architecture.md, "Codegen").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H
#define MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace mtc::codegen {

struct GPUCodegenOptions {
  /// Threads per block along x.
  int64_t blockSize = 256;
  /// NVPTX optimisation level, 0 to 3.
  unsigned optLevel = 3;
  /// CUDA toolkit root whose `nvvm/libdevice/libdevice.10.bc` provides the math functions.
  /// Empty: $CUDA_ROOT, $CUDA_HOME or $CUDA_PATH, else the toolkit found when mtc was
  /// configured, else MLIR's default. Without libdevice, kernels that use exp, erf, tanh,
  /// ... are an error.
  std::string cudaPath;
};

/// The architectures the PTX (ISA 8.0) can target.
inline constexpr const char *kGPUArchitectures[] = {"sm_70", "sm_75", "sm_80", "sm_86",
                                                    "sm_87", "sm_89", "sm_90"};

/// An error naming `chip` unless it is one of kGPUArchitectures.
llvm::Error checkGPUArchitecture(llvm::StringRef chip);

/// Compiles `linalgModule` (left unchanged: the backend works on a clone) to PTX for `chip`
/// (one of kGPUArchitectures) and returns the PTX text. The PTX ISA version is 8.0
/// (`+ptx80`), which every supported chip accepts. Every linalg op becomes a kernel.
llvm::Expected<std::string> compileToPTX(mlir::ModuleOp linalgModule, llvm::StringRef chip,
                                         const GPUCodegenOptions &options = {});

/// What a kernel launch passes for one kernel parameter: a buffer (the host function's
/// argument, a temporary it allocates, or another view) or a scalar (a loop index, a
/// dropout key word).
struct GPUKernelArgument {
  enum class Kind { Argument, Temporary, View, Scalar };
  Kind kind;
  /// The function argument's position (Kind::Argument), else -1.
  int64_t argument = -1;
  /// The bytes the buffer's type spans (0 for a scalar or a dynamic shape).
  int64_t bytes = 0;
  /// A scalar's type ("index", "i64", "f32", ...).
  std::string scalarType;
};

/// One launch of a host function, in the order the function runs them.
struct GPUKernelLaunch {
  std::string kernel;
  std::string function;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  std::vector<GPUKernelArgument> arguments;
};

/// The kernels of a step and the PTX of each chip.
struct GPUStepKernels {
  std::vector<GPUKernelLaunch> launches;
  /// Per host function (every function of the step, in module order): the functions it
  /// calls, each once, in the order of their first call.
  std::vector<std::pair<std::string, std::vector<std::string>>> calls;
  /// (chip, PTX) in the order of `chips`.
  std::vector<std::pair<std::string, std::string>> ptx;
  /// The host functions on buffers, each launch a call of mtc_gpu_launch (see the file
  /// comment), for mtc-gpu-host-to-llvm-pipeline.
  mlir::OwningOpRef<mlir::ModuleOp> host;
};

/// Compiles the kernels of `buffers` (left unchanged), a step after
/// mtc-gpu-bufferize-pipeline, to PTX for each of `chips`: every linalg op of every
/// function becomes a kernel; calls (GEMMs, collectives, other functions) stay on the host
/// and are listed, and the host functions are kept as code (GPUStepKernels::host).
llvm::Expected<GPUStepKernels> compileStepKernels(mlir::ModuleOp buffers,
                                                  llvm::ArrayRef<std::string> chips,
                                                  const GPUCodegenOptions &options = {});

/// The `ptxas` of the toolkit (GPUCodegenOptions::cudaPath's rules, then $PATH); empty if
/// there is none.
std::string findPtxas(const GPUCodegenOptions &options = {});

/// Assembles `ptx` for `chip` with `ptxas` into a cubin and returns its bytes.
llvm::Expected<std::string> assembleCubin(llvm::StringRef ptx, llvm::StringRef chip,
                                          llvm::StringRef ptxas);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H

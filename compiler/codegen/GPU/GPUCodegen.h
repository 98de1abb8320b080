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
// The host side (which kernel runs when, on which buffers) is not emitted yet: the
// runtime's stage programs will launch kernels (docs/architecture.md, "Codegen").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H
#define MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

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

/// Compiles `linalgModule` (left unchanged: the backend works on a clone) to PTX for `chip`
/// ("sm_80" or "sm_90"; any "sm_NN" NVPTX knows is accepted) and returns the PTX text. The
/// PTX ISA version is 8.0 (`+ptx80`), which every supported chip accepts.
llvm::Expected<std::string> compileToPTX(mlir::ModuleOp linalgModule, llvm::StringRef chip,
                                         const GPUCodegenOptions &options = {});

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_GPU_GPUCODEGEN_H

//===- Gemm.h - The batched matrix product compiled kernels call -*- C++ -*-===//
//
// The CPU backend turns every f32 `linalg.batch_matmul` into a call of
// `_mlir_ciface_mtc_batch_matmul_f32` (runtime/exec/KernelABI.h), which the process
// loading the kernels defines here with OpenBLAS's cblas_sgemm:
//
//     c[i] += a[i] x b[i]   for i < batch;  a: [batch, m, k], b: [batch, k, n], c: [batch, m, n]
//
// After the kernel context (unused here), each argument is a pointer to an MLIR memref
// descriptor of rank 3 with any offset and strides. A matrix whose rows or columns are contiguous
// goes to BLAS (the latter as a transposed operand; a result with contiguous columns as the product
// C^T = B^T A^T); any other layout, or a size BLAS's 32-bit integers cannot hold, is computed by a
// plain loop.
//
// A product of two bf16 matrices (how the CPU backend lowers a bf16 `mt.contract`) calls
// `_mlir_ciface_mtc_batch_matmul_bf16`, defined in GemmBf16.cpp with oneDNN's matmul: the
// same sum with bf16 a and b and an f32 c, computed by the CPU's bf16 instructions where it
// has them (AMX, AVX512-BF16; a bf16 product is exact in f32 and the sums are f32's) and
// by oneDNN's or, where oneDNN has no implementation, an f32 copy's emulation otherwise.
// The output is cut into fixed tiles of whole sums, one thread and one oneDNN call each, so
// the result does not depend on the number of threads (docs/runtime.md "Threads").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_GEMM_H
#define MTC_RUNTIME_EXEC_GEMM_H

#include "runtime/exec/KernelABI.h"

namespace mtc::rt {

/// A rank-3 f32 memref descriptor (the ABI's, runtime/exec/KernelABI.h).
using MemRef3F32 = MtcMemRef3F32;
/// A rank-3 bf16 memref descriptor (elements by their bits).
using MemRef3BF16 = MtcMemRef3BF16;

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_GEMM_H

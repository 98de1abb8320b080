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
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_GEMM_H
#define MTC_RUNTIME_EXEC_GEMM_H

#include "runtime/exec/KernelABI.h"

namespace mtc::rt {

/// A rank-3 f32 memref descriptor (the ABI's, runtime/exec/KernelABI.h).
using MemRef3F32 = MtcMemRef3F32;

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_GEMM_H

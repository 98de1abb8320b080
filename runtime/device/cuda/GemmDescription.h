//===- GemmDescription.h - A row-major GEMM, as cuBLASLt sees it -*- C++ -*-===//
//
// The runtime's GEMMs are row-major, like every buffer of the plan:
//
//     C[b] = alpha * op(A[b]) x op(B[b]) + beta * C[b]        for b < batch
//     op(A): m x k (A stored m x k, or k x m with transA), op(B): k x n (B stored k x n, or
//     n x k with transB), C: m x n; lda, ldb, ldc: elements between consecutive rows;
//     strideA/B/C: elements between consecutive matrices of the batch.
//
// cuBLASLt is column-major. A row-major matrix with leading dimension ld is the column-major
// matrix of its transpose with the same ld, so the row-major product is handed to cuBLASLt as
// the column-major product of the transposes, C^T = op(B)^T x op(A)^T:
//
//     cuBLASLt's A := our B, B := our A, (m, n) := (n, m), k, the transposes and leading
//     dimensions swapped with the operands; C keeps its ld.
//
// (toColumnMajor computes this.) cuBLASLt's ORDER_ROW layouts would avoid the swap but few of
// its kernels support them; the swap reaches all of them at no cost. A bias epilogue adds a
// vector along cuBLASLt's rows of D, which are our columns: a bias of length n added to every
// row of C, the linear layer's bias. For the same reason cuBLASLt's BGRADA (a reduction of its
// A over k) is the sum of our op(B) over k, and BGRADB the sum of our op(A).
//
// GemmDescription is the full description of a product, the key of CublasLtGemm's heuristic
// cache: two GEMMs with equal descriptions run the same cuBLASLt algorithm.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_GEMMDESCRIPTION_H
#define MTC_RUNTIME_DEVICE_CUDA_GEMMDESCRIPTION_H

#include "runtime/comm/CollectiveTypes.h"
#include "runtime/support/Error.h"

#include <cstddef>
#include <cstdint>

namespace mtc::rt::cuda {

/// What cuBLASLt does besides the product. Bias, Gelu, BiasGelu change what is written to C
/// (a bias vector of length n added to every row, then GELU); cuBLASLt's GELU is the tanh
/// approximation, so use it only for a model whose gelu is that approximation. BiasGradA and
/// BiasGradB also write a vector: the sum over k of op(A) (length m) or of op(B) (length n),
/// i.e. a linear layer's bias gradient computed with its weight gradient (dW = X^T dY with
/// B = dY: BiasGradB). They need batch 1.
enum class GemmEpilogue : uint8_t { None, Bias, Gelu, BiasGelu, BiasGradA, BiasGradB };

/// Whether the epilogue reads a bias vector, or writes a bias gradient.
bool readsBias(GemmEpilogue epilogue);
bool writesBiasGradient(GemmEpilogue epilogue);

struct GemmDescription {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  /// The element type of A, B, C (and the bias): f32, bf16 or f16; products accumulate in f32.
  MtcElementType dtype = MTC_F32;
  /// bf16 and f16 only: C (and the bias) in f32 instead, the low-precision products
  /// accumulated into it (how a bf16 plan's contractions are lowered).
  bool f32Output = false;
  /// f32 only: let cuBLASLt round the inputs to TF32 (CUBLAS_COMPUTE_32F_FAST_TF32). Off by
  /// default: the CPU/GPU equivalence at 1e-5 needs full fp32 products.
  bool allowTf32 = false;
  GemmEpilogue epilogue = GemmEpilogue::None;

  bool operator==(const GemmDescription &) const = default;

  /// The element type of C (and the bias).
  MtcElementType outputType() const { return f32Output ? MTC_F32 : dtype; }

  /// A plain (unbatched) row-major product with dense leading dimensions.
  static GemmDescription dense(int64_t m, int64_t n, int64_t k, bool transA = false,
                               bool transB = false, MtcElementType dtype = MTC_F32);
};

/// Hashes every field of the description.
struct GemmDescriptionHash {
  size_t operator()(const GemmDescription &d) const;
};

/// Checks a description: positive sizes and batch, each leading dimension at least its
/// stored matrix's row length, batch strides that keep the matrices of a batch apart (0 for
/// A or B broadcasts one matrix), a supported element type, TF32 only with f32.
Error validateGemm(const GemmDescription &d);

/// The column-major product cuBLASLt runs for a row-major description (see the file comment).
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  /// Rows and columns of the stored A and B, as cuBLASLt's matrix layouts want them.
  int64_t rowsA = 0, colsA = 0, rowsB = 0, colsB = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;
};
ColumnMajorGemm toColumnMajor(const GemmDescription &d);

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_GEMMDESCRIPTION_H

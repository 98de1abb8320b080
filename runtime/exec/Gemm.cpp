//===- Gemm.cpp - The batched matrix product compiled kernels call --------===//

#include "runtime/exec/Gemm.h"

#include "runtime/support/StridedMatrix.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <optional>

namespace mtc::rt {
namespace {

/// How BLAS reads a rows x cols matrix with the given strides (StridedMatrix.h), when its
/// leading dimension fits BLAS's int.
struct BlasOperand {
  CBLAS_TRANSPOSE transpose;
  int leading;
};

bool fitsBlasInt(int64_t value) { return value >= 0 && value <= INT_MAX; }

std::optional<BlasOperand> blasOperand(int64_t rows, int64_t cols, int64_t rowStride,
                                       int64_t colStride) {
  std::optional<StridedMatrix> matrix = stridedMatrix(rows, cols, rowStride, colStride);
  if (!matrix || !fitsBlasInt(matrix->leading))
    return std::nullopt;
  return BlasOperand{matrix->transposed ? CblasTrans : CblasNoTrans,
                     static_cast<int>(matrix->leading)};
}

/// c += a x b on one matrix of each, element by element (layouts BLAS cannot read).
void multiplyByLoops(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
                     const int64_t *aStrides, const int64_t *bStrides, const int64_t *cStrides) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t l = 0; l < k; ++l)
        sum += a[i * aStrides[1] + l * aStrides[2]] * b[l * bStrides[1] + j * bStrides[2]];
      c[i * cStrides[1] + j * cStrides[2]] += sum;
    }
}

} // namespace

} // namespace mtc::rt

// The context is unused: the product needs none of the call's state (on a GPU it will carry
// the stream).
extern "C" void _mlir_ciface_mtc_batch_matmul_f32(MtcKernelContext *, mtc::rt::MemRef3F32 *a,
                                                  mtc::rt::MemRef3F32 *b, mtc::rt::MemRef3F32 *c) {
  using namespace mtc::rt;
  int64_t batch = c->sizes[0], m = c->sizes[1], n = c->sizes[2], k = a->sizes[2];
  // An empty product adds nothing.
  if (batch == 0 || m == 0 || n == 0 || k == 0)
    return;
  std::optional<BlasOperand> lhs = blasOperand(m, k, a->strides[1], a->strides[2]);
  std::optional<BlasOperand> rhs = blasOperand(k, n, b->strides[1], b->strides[2]);
  std::optional<BlasOperand> result = blasOperand(m, n, c->strides[1], c->strides[2]);
  bool useBlas = lhs && rhs && result && fitsBlasInt(m) && fitsBlasInt(n) && fitsBlasInt(k);
  // A result with contiguous columns is the row-major transpose C^T = B^T A^T: the same
  // call with the operands swapped and each one's transposition flipped.
  bool transposedResult = useBlas && result->transpose == CblasTrans;
  auto flip = [](CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CblasTrans : CblasNoTrans; };
  for (int64_t i = 0; i < batch; ++i) {
    const float *aData = a->aligned + a->offset + i * a->strides[0];
    const float *bData = b->aligned + b->offset + i * b->strides[0];
    float *cData = c->aligned + c->offset + i * c->strides[0];
    if (transposedResult)
      cblas_sgemm(CblasRowMajor, flip(rhs->transpose), flip(lhs->transpose), static_cast<int>(n),
                  static_cast<int>(m), static_cast<int>(k), /*alpha=*/1.0f, bData, rhs->leading,
                  aData, lhs->leading, /*beta=*/1.0f, cData, result->leading);
    else if (useBlas)
      cblas_sgemm(CblasRowMajor, lhs->transpose, rhs->transpose, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), /*alpha=*/1.0f, aData, lhs->leading,
                  bData, rhs->leading, /*beta=*/1.0f, cData, result->leading);
    else
      multiplyByLoops(aData, bData, cData, m, n, k, a->strides, b->strides, c->strides);
  }
}

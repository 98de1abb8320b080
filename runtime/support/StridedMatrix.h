//===- StridedMatrix.h - How a GEMM library reads a strided matrix -*- C++ -*-===//
//
// A rows x cols matrix stored with a row stride and a column stride (in elements) is what a
// BLAS-style GEMM reads directly when its rows are contiguous (as stored, leading dimension
// the row stride) or its columns are (transposed, leading dimension the column stride). The
// stride of a dimension of size 1 is never used, so it decides nothing. The CPU GEMM
// (runtime/exec/Gemm.cpp, OpenBLAS) and the GPU one (runtime/device/cuda/GpuHostCalls.cpp,
// cuBLASLt) read the compiled kernels' memref operands through this one rule.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_STRIDEDMATRIX_H
#define MTC_RUNTIME_SUPPORT_STRIDEDMATRIX_H

#include <algorithm>
#include <cstdint>
#include <optional>

namespace mtc::rt {

struct StridedMatrix {
  bool transposed = false;
  int64_t leading = 0;
};

/// How a GEMM reads the matrix, or none when neither its rows nor its columns are contiguous.
inline std::optional<StridedMatrix> stridedMatrix(int64_t rows, int64_t cols, int64_t rowStride,
                                                  int64_t colStride) {
  if ((cols <= 1 || colStride == 1) && (rows <= 1 || rowStride >= cols))
    return StridedMatrix{false, rows <= 1 ? std::max<int64_t>(cols, 1) : rowStride};
  if ((rows <= 1 || rowStride == 1) && (cols <= 1 || colStride >= rows))
    return StridedMatrix{true, cols <= 1 ? std::max<int64_t>(rows, 1) : colStride};
  return std::nullopt;
}

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_STRIDEDMATRIX_H

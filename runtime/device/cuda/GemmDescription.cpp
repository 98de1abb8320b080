//===- GemmDescription.cpp - A row-major GEMM, as cuBLASLt sees it -------===//

#include "runtime/device/cuda/GemmDescription.h"

#include <functional>
#include <limits>

namespace mtc::rt::cuda {

GemmDescription GemmDescription::dense(int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                                       MtcElementType dtype) {
  GemmDescription d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.transA = transA;
  d.transB = transB;
  d.lda = transA ? m : k;
  d.ldb = transB ? k : n;
  d.ldc = n;
  d.strideA = m * k;
  d.strideB = k * n;
  d.strideC = m * n;
  d.dtype = dtype;
  return d;
}

bool readsBias(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::BiasGelu;
}

bool writesBiasGradient(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::BiasGradA || epilogue == GemmEpilogue::BiasGradB;
}

size_t GemmDescriptionHash::operator()(const GemmDescription &d) const {
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (int64_t v : {d.m, d.n, d.k, d.lda, d.ldb, d.ldc, d.batch, d.strideA, d.strideB, d.strideC})
    mix(static_cast<uint64_t>(v));
  mix((uint64_t(d.transA) << 0) | (uint64_t(d.transB) << 1) | (uint64_t(d.allowTf32) << 2) |
      (uint64_t(d.epilogue) << 3) | (uint64_t(d.f32Output) << 7) |
      (uint64_t(static_cast<uint32_t>(d.dtype)) << 8));
  return h;
}

Error validateGemm(const GemmDescription &d) {
  auto fail = [&](auto... pieces) {
    return makeError("GEMM ", d.m, "x", d.n, "x", d.k, ": ", pieces...);
  };
  if (d.m <= 0 || d.n <= 0 || d.k <= 0)
    return fail("m, n and k must be positive");
  if (d.batch <= 0 || d.batch > std::numeric_limits<int32_t>::max())
    return fail("batch ", d.batch, " must be positive and fit in 32 bits");
  if (d.dtype != MTC_F32 && d.dtype != MTC_BF16 && d.dtype != MTC_F16)
    return fail("element type code ", static_cast<int32_t>(d.dtype), " is not f32, bf16 or f16");
  if (d.allowTf32 && d.dtype != MTC_F32)
    return fail("TF32 applies to f32 products only");
  if (d.f32Output && d.dtype == MTC_F32)
    return fail("an f32 output applies to bf16 and f16 products only");
  if (d.epilogue > GemmEpilogue::BiasGradB)
    return fail("unknown epilogue code ", static_cast<int>(d.epilogue));
  if (writesBiasGradient(d.epilogue) && d.batch != 1)
    return fail("a bias-gradient epilogue needs batch 1, not ", d.batch);
  // Stored shapes, row-major: rows x cols, ld >= cols.
  int64_t rowsA = d.transA ? d.k : d.m, colsA = d.transA ? d.m : d.k;
  int64_t rowsB = d.transB ? d.n : d.k, colsB = d.transB ? d.k : d.n;
  if (d.lda < colsA)
    return fail("lda ", d.lda, " is less than A's row of ", colsA, " elements");
  if (d.ldb < colsB)
    return fail("ldb ", d.ldb, " is less than B's row of ", colsB, " elements");
  if (d.ldc < d.n)
    return fail("ldc ", d.ldc, " is less than C's row of ", d.n, " elements");
  if (d.batch > 1) {
    if (d.strideA < 0 || d.strideB < 0)
      return fail("batch strides must not be negative");
    // A matrix spans (rows - 1) * ld + cols elements; the next one must start after it.
    // A stride of 0 reuses one A or B for the whole batch; C must not overlap itself.
    auto span = [](int64_t rows, int64_t cols, int64_t ld) { return (rows - 1) * ld + cols; };
    if (d.strideA != 0 && d.strideA < span(rowsA, colsA, d.lda))
      return fail("strideA ", d.strideA, " overlaps consecutive A matrices");
    if (d.strideB != 0 && d.strideB < span(rowsB, colsB, d.ldb))
      return fail("strideB ", d.strideB, " overlaps consecutive B matrices");
    if (d.strideC < span(d.m, d.n, d.ldc))
      return fail("strideC ", d.strideC, " overlaps consecutive C matrices");
  }
  return Error::success();
}

ColumnMajorGemm toColumnMajor(const GemmDescription &d) {
  ColumnMajorGemm c;
  c.m = d.n;
  c.n = d.m;
  c.k = d.k;
  // cuBLASLt's A is our B: stored row-major rowsB x colsB, i.e. column-major colsB x rowsB.
  c.transA = d.transB;
  c.transB = d.transA;
  c.rowsA = d.transB ? d.k : d.n;
  c.colsA = d.transB ? d.n : d.k;
  c.rowsB = d.transA ? d.m : d.k;
  c.colsB = d.transA ? d.k : d.m;
  c.lda = d.ldb;
  c.ldb = d.lda;
  c.ldc = d.ldc;
  c.strideA = d.strideB;
  c.strideB = d.strideA;
  c.strideC = d.strideC;
  return c;
}

} // namespace mtc::rt::cuda

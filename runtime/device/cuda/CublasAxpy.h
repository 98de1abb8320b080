//===- CublasAxpy.h - y += x on the device, through cuBLAS -------*- C++ -*-===//
//
// The one vector operation the CUDA trainer needs outside the plan's kernels: adding a later
// micro-batch's gradients to the step's (the CPU's GradientBuffer adds them element by
// element in f32; cuBLAS's saxpy with alpha 1 rounds each sum the same way). One cuBLAS
// handle, created on the current device; the additions are enqueued on the stream given.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUBLASAXPY_H
#define MTC_RUNTIME_DEVICE_CUDA_CUBLASAXPY_H

#include "runtime/support/Error.h"

#include <cstdint>

struct cublasContext; // cublasHandle_t's pointee (cublas_api.h)

namespace mtc::rt::cuda {

class Stream;

class CublasAxpy {
public:
  static Expected<CublasAxpy> create();

  CublasAxpy(CublasAxpy &&other) noexcept;
  CublasAxpy &operator=(CublasAxpy &&other) noexcept;
  CublasAxpy(const CublasAxpy &) = delete;
  CublasAxpy &operator=(const CublasAxpy &) = delete;
  ~CublasAxpy();

  /// Enqueues y[i] += x[i] for i < `elements` on `stream` (device pointers).
  Error add(float *y, const float *x, int64_t elements, const Stream &stream);

private:
  explicit CublasAxpy(cublasContext *handle) : handle_(handle) {}
  cublasContext *handle_ = nullptr;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUBLASAXPY_H

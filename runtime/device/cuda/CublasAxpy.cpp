//===- CublasAxpy.cpp - y += x on the device, through cuBLAS --------------===//

#include "runtime/device/cuda/CublasAxpy.h"

#include "runtime/device/cuda/CudaError.h"
#include "runtime/device/cuda/Stream.h"

#include <cublas_api.h>

#include <utility>

namespace mtc::rt::cuda {

Expected<CublasAxpy> CublasAxpy::create() {
  cublasHandle_t handle = nullptr;
  if (Error e = cublasStatus(cublasCreate_v2(&handle), "creating the cuBLAS handle"); !e.ok())
    return e;
  // alpha is read from host memory.
  if (Error e = cublasStatus(cublasSetPointerMode_v2(handle, CUBLAS_POINTER_MODE_HOST),
                             "setting cuBLAS's pointer mode");
      !e.ok()) {
    cublasDestroy_v2(handle);
    return e;
  }
  return CublasAxpy(handle);
}

CublasAxpy::CublasAxpy(CublasAxpy &&other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasAxpy &CublasAxpy::operator=(CublasAxpy &&other) noexcept {
  if (this != &other) {
    if (handle_)
      cublasDestroy_v2(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasAxpy::~CublasAxpy() {
  if (handle_)
    cublasDestroy_v2(handle_);
}

Error CublasAxpy::add(float *y, const float *x, int64_t elements, const Stream &stream) {
  if (elements < 0)
    return makeError("cuBLAS axpy of ", elements, " elements");
  if (elements == 0)
    return Error::success();
  if (Error e = cublasStatus(cublasSetStream_v2(handle_, stream.handle()),
                             concat("setting cuBLAS's stream to ", stream.name()));
      !e.ok())
    return e;
  const float one = 1.0f;
  return cublasStatus(cublasSaxpy_v2_64(handle_, elements, &one, x, 1, y, 1),
                      concat("adding ", elements, " gradients (cuBLAS saxpy)"));
}

} // namespace mtc::rt::cuda

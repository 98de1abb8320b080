//===- CudaError.cpp - CUDA and cuBLASLt status codes as Error values -----===//

#include "runtime/device/cuda/CudaError.h"

#include <cublasLt.h>

namespace mtc::rt::cuda {

Error cudaStatus(cudaError_t status, std::string_view what) {
  if (status == cudaSuccess)
    return Error::success();
  // The failed call also left `status` as the thread's last error; clear it (a no-op for a
  // sticky error), so that it does not resurface in a later, unrelated cudaGetLastError.
  (void)cudaGetLastError();
  return makeError(what, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}

Error cublasStatus(int status, std::string_view what) {
  auto s = static_cast<cublasStatus_t>(status);
  if (s == CUBLAS_STATUS_SUCCESS)
    return Error::success();
  return makeError(what, ": ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ")");
}

bool meansNoDevice(cudaError_t status) {
  switch (status) {
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorDevicesUnavailable:
  case cudaErrorCompatNotSupportedOnDevice:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorInitializationError:
    return true;
  default:
    return false;
  }
}

} // namespace mtc::rt::cuda

//===- CudaError.h - CUDA and cuBLASLt status codes as Error values -*- C++ -*-===//
//
// Every CUDA call of the device layer goes through these, so that a failure reads the same
// everywhere: what was being done, the status's name (grep-able, stable across releases) and
// its description, e.g.
//
//     allocating the device arena (4096 bytes): cudaErrorMemoryAllocation (out of memory)
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUDAERROR_H
#define MTC_RUNTIME_DEVICE_CUDA_CUDAERROR_H

#include "runtime/support/Error.h"

#include <cuda_runtime_api.h>

#include <string_view>

namespace mtc::rt::cuda {

/// Success for cudaSuccess, otherwise "<what>: <cudaErrorName> (<description>)" (and the
/// thread's last CUDA error is cleared).
Error cudaStatus(cudaError_t status, std::string_view what);

/// Success for CUBLAS_STATUS_SUCCESS (0), otherwise "<what>: <CUBLAS_STATUS_...> (<description>)".
/// Takes the status as its integer so that this header needs no cuBLAS header.
Error cublasStatus(int status, std::string_view what);

/// Whether `status` says that no CUDA device can be used at all (no driver, a driver too old
/// for the runtime, no device, every device busy or hidden), as opposed to a failure of one
/// operation.
bool meansNoDevice(cudaError_t status);

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUDAERROR_H

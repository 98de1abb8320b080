//===- CudaLayerEntry.cpp - The CUDA layer module's exported table --------===//
//
// The one function libmtc-cuda.so exports for the program that loads it (CudaLayer.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/CudaLayer.h"
#include "runtime/device/cuda/CudaTrainer.h"

extern "C" __attribute__((visibility("default"))) const mtc::rt::cuda::CudaLayerFunctions *
mtc_cuda_layer() {
  using namespace mtc::rt::cuda;
  static constexpr CudaLayerFunctions functions{kCudaLayerAbiVersion, &checkCudaPlan,
                                                &visibleDeviceCount, &checkDevicesForLocalRanks,
                                                &cudaBackend};
  return &functions;
}

//===- FakeCudaLayer.cpp - Modules that are not the CUDA layer CudaLayer takes ===//
//
// Built twice for CudaLayerTest: with MTC_FAKE_LAYER_ABI_VERSION, a module whose entry point
// returns a table of another ABI version; without, a shared object with no entry point.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/CudaLayer.h"

#ifdef MTC_FAKE_LAYER_ABI_VERSION
extern "C" __attribute__((visibility("default"))) const mtc::rt::cuda::CudaLayerFunctions *
mtc_cuda_layer() {
  static constexpr mtc::rt::cuda::CudaLayerFunctions functions{MTC_FAKE_LAYER_ABI_VERSION,
                                                               nullptr, nullptr, nullptr, nullptr};
  return &functions;
}
#else
extern "C" __attribute__((visibility("default"))) int mtc_not_a_layer() { return 0; }
#endif

//===- GpuHostCalls.h - The CUDA host code's runtime imports -----*- C++ -*-===//
//
// A CUDA plan's host code (`kernels/cuda_host.so`, compiler/codegen/GPU/GPUCodegen.h) imports
// the GPU section of runtime/exec/KernelABI.h from the process that loads it; this file
// defines them over the device layer:
//
//   mtc_gpu_launch            the plan's kernel by name (PlanKernels: looked up once, then
//                             cached), launched on the call's compute stream with a pointer
//                             to each 64-bit argument word (Kernel::launch)
//   mtc_gpu_workspace(_release)
//                             the context's workspace (a range of the device arena); a
//                             function that needs more than the plan's workspace bytes is an
//                             error of the call, never a host allocation
//   _mlir_ciface_mtc_gpu_batch_matmul_f32, _bf16
//                             c[i] += a[i] x b[i] on cuBLASLt (describeBatchMatmul, beta 1,
//                             TF32 off; bf16 A and B into an f32 C)
//
// They reach the executor's state through MtcKernelContext::gpu, a GpuCall: the kernels, the
// stream, the GEMM engine, and the call's first failure. The imports return nothing, so a
// failure is recorded there and every later import of the call does nothing; the caller
// checks `failure` after the host function returns.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_GPUHOSTCALLS_H
#define MTC_RUNTIME_DEVICE_CUDA_GPUHOSTCALLS_H

#include "runtime/device/cuda/CublasLtGemm.h"
#include "runtime/device/cuda/GemmDescription.h"
#include "runtime/device/cuda/KernelModule.h"
#include "runtime/exec/KernelABI.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace mtc::rt::cuda {

class CudaDevice;
class Stream;

/// The plan's binary for a device of compute capability major.minor: the cubin of exactly
/// that chip, else the PTX of the newest chip not newer than it (the driver compiles PTX
/// for newer devices, never older). An error lists the plan's chips when none fits.
Expected<const CudaBinary *> selectBinary(const CudaKernelsInfo &kernels, int major, int minor);

/// The plan's kernels loaded on the current device (selectBinary), with their lookups cached.
class PlanKernels {
public:
  static Expected<PlanKernels> load(const Plan &plan, const CudaDevice &device);

  /// The kernel `name`; an error names it and the image when the image lacks it.
  Expected<const Kernel *> kernel(const std::string &name);
  const KernelModule &module() const { return module_; }

private:
  explicit PlanKernels(KernelModule module) : module_(std::move(module)) {}
  KernelModule module_;
  std::map<std::string, Kernel, std::less<>> kernels_;
};

/// What one call of a host function reaches through MtcKernelContext::gpu.
struct GpuCall {
  PlanKernels *kernels = nullptr;
  const Stream *stream = nullptr;
  CublasLtGemm *gemm = nullptr;
  /// The call's first failure (a failed launch, GEMM or workspace request).
  Error failure;
};

/// The row-major description of c[i] += a[i] x b[i] on rank-3 descriptors (KernelABI.h's
/// MtcMemRef3F32): each matrix of A and B stored as is or transposed (unit stride along
/// columns or rows), C's rows contiguous; an error names a layout cuBLASLt cannot take.
/// beta is 1 (the product accumulates), TF32 off.
Expected<GemmDescription> describeBatchMatmul(const MtcMemRef3F32 &a, const MtcMemRef3F32 &b,
                                              const MtcMemRef3F32 &c);
/// The same for bf16 A and B into an f32 C (KernelABI.h's MtcMemRef3BF16): dtype bf16,
/// f32Output.
Expected<GemmDescription> describeBatchMatmul(const MtcMemRef3BF16 &a, const MtcMemRef3BF16 &b,
                                              const MtcMemRef3F32 &c);

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_GPUHOSTCALLS_H

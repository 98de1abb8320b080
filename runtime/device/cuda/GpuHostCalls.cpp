//===- GpuHostCalls.cpp - The CUDA host code's runtime imports ------------===//

#include "runtime/device/cuda/GpuHostCalls.h"

#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/Stream.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/StridedMatrix.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace mtc::rt::cuda {
namespace {

/// "sm_90" -> 90; -1 for a name that is not sm_<digits>.
int chipNumber(const std::string &chip) {
  if (chip.size() < 4 || chip.compare(0, 3, "sm_") != 0)
    return -1;
  int number = 0;
  for (char c : chip.substr(3)) {
    if (c < '0' || c > '9' || number > 1000)
      return -1;
    number = number * 10 + (c - '0');
  }
  return number;
}

GpuCall *callOf(MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  return checked ? static_cast<GpuCall *>(checked->gpu) : nullptr;
}

} // namespace

Expected<const CudaBinary *> selectBinary(const CudaKernelsInfo &kernels, int major, int minor) {
  int device = major * 10 + minor;
  const CudaBinary *best = nullptr;
  std::string chips;
  for (const CudaBinary &binary : kernels.binaries) {
    chips += (chips.empty() ? "" : ", ") + binary.chip;
    int number = chipNumber(binary.chip);
    if (number == device && binary.cubinFile)
      return &binary;
    if (number >= 0 && number <= device && (!best || number > chipNumber(best->chip)))
      best = &binary;
  }
  if (!best)
    return makeError("the plan's CUDA kernels are for ", chips, ", none of which runs on an sm_",
                     device, " device (recompile with --cuda-arch=sm_", device, ")");
  return best;
}

Expected<PlanKernels> PlanKernels::load(const Plan &plan, const CudaDevice &device) {
  if (!plan.cudaKernels)
    return makeError(plan.dir.string(), ": the plan has no CUDA kernels");
  Expected<const CudaBinary *> binary =
      selectBinary(*plan.cudaKernels, device.computeMajor(), device.computeMinor());
  if (!binary)
    return binary.takeError().withContext(plan.dir.string());
  // The cubin of the device's own chip, else the PTX (selectBinary): the driver JIT-compiles it.
  const CudaBinary &chosen = **binary;
  bool cubin = chosen.cubinFile && chipNumber(chosen.chip) ==
                                       device.computeMajor() * 10 + device.computeMinor();
  std::filesystem::path file = plan.dir / (cubin ? *chosen.cubinFile : chosen.ptxFile);
  Expected<std::string> image = readInputFile(file);
  if (!image)
    return image.takeError();
  Expected<KernelModule> module = KernelModule::load(
      std::as_bytes(std::span<const char>(image->data(), image->size())), file.string());
  if (!module)
    return module.takeError();
  return PlanKernels(std::move(*module));
}

Expected<const Kernel *> PlanKernels::kernel(const std::string &name) {
  if (auto found = kernels_.find(name); found != kernels_.end())
    return &found->second;
  Expected<Kernel> kernel = module_.kernel(name);
  if (!kernel)
    return kernel.takeError();
  return &kernels_.emplace(name, std::move(*kernel)).first->second;
}

namespace {

/// describeBatchMatmul of descriptors whose A and B hold `dtype` elements.
template <class Operand>
Expected<GemmDescription> describeProduct(const Operand &a, const Operand &b,
                                          const MtcMemRef3F32 &c, MtcElementType dtype) {
  int64_t batch = c.sizes[0], m = c.sizes[1], n = c.sizes[2], k = a.sizes[2];
  if (a.sizes[0] != batch || b.sizes[0] != batch || a.sizes[1] != m || b.sizes[1] != k ||
      b.sizes[2] != n)
    return makeError("batch_matmul: operand shapes [", a.sizes[0], ", ", a.sizes[1], ", ",
                     a.sizes[2], "] x [", b.sizes[0], ", ", b.sizes[1], ", ", b.sizes[2],
                     "] -> [", batch, ", ", m, ", ", n, "] do not match");
  std::optional<StridedMatrix> lhs = stridedMatrix(m, k, a.strides[1], a.strides[2]);
  std::optional<StridedMatrix> rhs = stridedMatrix(k, n, b.strides[1], b.strides[2]);
  std::optional<StridedMatrix> result = stridedMatrix(m, n, c.strides[1], c.strides[2]);
  if (!lhs || !rhs || !result || result->transposed)
    return makeError("batch_matmul: a layout cuBLASLt cannot read (strides A [", a.strides[1],
                     ", ", a.strides[2], "], B [", b.strides[1], ", ", b.strides[2], "], C [",
                     c.strides[1], ", ", c.strides[2], "]; C's rows must be contiguous)");
  GemmDescription d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.transA = lhs->transposed;
  d.transB = rhs->transposed;
  d.lda = lhs->leading;
  d.ldb = rhs->leading;
  d.ldc = result->leading;
  d.batch = batch;
  // A batch of one has no stride to speak of; validateGemm wants the matrices apart.
  d.strideA = batch > 1 ? a.strides[0] : 0;
  d.strideB = batch > 1 ? b.strides[0] : 0;
  d.strideC = batch > 1 ? c.strides[0] : m * result->leading;
  d.dtype = dtype;
  d.f32Output = dtype != MTC_F32;
  d.allowTf32 = false;
  if (Error e = validateGemm(d); !e.ok())
    return std::move(e).withContext("batch_matmul");
  return d;
}

} // namespace

Expected<GemmDescription> describeBatchMatmul(const MtcMemRef3F32 &a, const MtcMemRef3F32 &b,
                                              const MtcMemRef3F32 &c) {
  return describeProduct(a, b, c, MTC_F32);
}

Expected<GemmDescription> describeBatchMatmul(const MtcMemRef3BF16 &a, const MtcMemRef3BF16 &b,
                                              const MtcMemRef3F32 &c) {
  return describeProduct(a, b, c, MTC_BF16);
}

} // namespace mtc::rt::cuda

using mtc::rt::cuda::GpuCall;

extern "C" void mtc_gpu_launch(MtcKernelContext *context, const char *kernel, int64_t gx,
                               int64_t gy, int64_t gz, int64_t bx, int64_t by, int64_t bz,
                               const uint64_t *args, int64_t count) {
  GpuCall *call = mtc::rt::cuda::callOf(context);
  if (!call || !call->failure.ok())
    return;
  mtc::rt::Expected<const mtc::rt::cuda::Kernel *> found = call->kernels->kernel(kernel);
  if (!found) {
    call->failure = found.takeError();
    return;
  }
  mtc::rt::cuda::LaunchShape shape;
  int64_t sizes[6] = {gx, gy, gz, bx, by, bz};
  for (int i = 0; i < 6; ++i) {
    if (sizes[i] < 1 || sizes[i] > int64_t(UINT32_MAX)) {
      call->failure = mtc::rt::makeError("launching kernel '", kernel, "': size ", sizes[i],
                                         " is out of range");
      return;
    }
    (i < 3 ? shape.grid[i] : shape.block[i - 3]) = static_cast<uint32_t>(sizes[i]);
  }
  // cudaLaunchKernel reads each parameter through a pointer to it: the words hold the values
  // (a scalar in its low bytes, little endian).
  std::vector<void *> pointers(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    pointers[static_cast<size_t>(i)] = const_cast<uint64_t *>(args + i);
  if (mtc::rt::Error e = (*found)->launch(shape, *call->stream, pointers.data()); !e.ok())
    call->failure = std::move(e);
}

extern "C" void *mtc_gpu_workspace(MtcKernelContext *context, size_t bytes) {
  GpuCall *call = mtc::rt::cuda::callOf(context);
  if (!call)
    return nullptr;
  if (bytes > context->workspace_bytes && call->failure.ok())
    call->failure = mtc::rt::makeError("the CUDA host code asks for a workspace of ", bytes,
                                       " bytes, and the plan's is ", context->workspace_bytes);
  // After a failure nothing is launched, so the address is never read.
  return context->workspace;
}

extern "C" void mtc_gpu_workspace_release(MtcKernelContext *, void *) {
  // The workspace is the executor's range of the device arena: nothing to free.
}

namespace {

/// c[i] += a[i] x b[i] on the call's stream: the body of both GEMM imports.
template <class Operand>
void runBatchMatmul(MtcKernelContext *context, Operand *a, Operand *b, MtcMemRef3F32 *c) {
  GpuCall *call = mtc::rt::cuda::callOf(context);
  if (!call || !call->failure.ok())
    return;
  // An empty product adds nothing.
  if (c->sizes[0] == 0 || c->sizes[1] == 0 || c->sizes[2] == 0 || a->sizes[2] == 0)
    return;
  mtc::rt::Expected<mtc::rt::cuda::GemmDescription> d =
      mtc::rt::cuda::describeBatchMatmul(*a, *b, *c);
  if (!d) {
    call->failure = d.takeError();
    return;
  }
  mtc::rt::cuda::GemmOperands operands;
  operands.a = a->aligned + a->offset;
  operands.b = b->aligned + b->offset;
  operands.c = c->aligned + c->offset;
  operands.alpha = 1.0f;
  operands.beta = 1.0f;
  if (mtc::rt::Error e = call->gemm->run(*d, operands, *call->stream); !e.ok())
    call->failure = std::move(e);
}

} // namespace

extern "C" void _mlir_ciface_mtc_gpu_batch_matmul_f32(MtcKernelContext *context,
                                                      MtcMemRef3F32 *a, MtcMemRef3F32 *b,
                                                      MtcMemRef3F32 *c) {
  runBatchMatmul(context, a, b, c);
}

extern "C" void _mlir_ciface_mtc_gpu_batch_matmul_bf16(MtcKernelContext *context,
                                                       MtcMemRef3BF16 *a, MtcMemRef3BF16 *b,
                                                       MtcMemRef3F32 *c) {
  runBatchMatmul(context, a, b, c);
}

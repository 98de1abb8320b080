//===- KernelModule.h - Loaded GPU code and its kernels ---------*- C++ -*-===//
//
// A KernelModule holds one loaded image of GPU code, PTX text (compiled by the driver's JIT
// for the device at load time), a cubin (ELF, for one architecture) or a fatbin; the image
// kind is recognised from its first bytes. It is loaded with cudaLibraryLoadData (see
// CudaDevice.h for why the runtime API's library management) and unloaded on destruction.
// `kernel(name)` looks a kernel up; a name the image does not define is an error naming it.
// A Kernel is a handle into its module: the module must outlive it.
//
// CUDA loads libraries lazily by default (CUDA_MODULE_LOADING=LAZY): load() counts the
// image's kernels, which makes the driver read it, but compiling a kernel for the device
// may still wait for its first lookup or launch, so an image the driver cannot use can also
// fail there (cudaErrorInvalidPtx, cudaErrorNoKernelImageForDevice), as an Error all the same.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_KERNELMODULE_H
#define MTC_RUNTIME_DEVICE_CUDA_KERNELMODULE_H

#include "runtime/support/Error.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mtc::rt::cuda {

class Stream;

enum class KernelImageKind { Ptx, Cubin, Fatbin };

/// "PTX", "cubin", "fatbin".
std::string_view kernelImageKindName(KernelImageKind kind);

/// The kind of `image`: a cubin starts with ELF's magic, a fatbin with 0xBA55ED50 (little
/// endian), PTX is text with a `.version` directive. Anything else (an empty image included)
/// is an error.
Expected<KernelImageKind> classifyKernelImage(std::span<const std::byte> image);

/// A launch's grid and block sizes (x, y, z) and dynamic shared memory.
struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicSharedBytes = 0;
};

/// Checks the limits every CUDA device shares: every size at least 1, at most 1024 threads
/// per block (x, y <= 1024, z <= 64), grid y and z at most 65535, grid x below 2^31.
Error checkLaunchShape(const LaunchShape &shape);

class Kernel {
public:
  const std::string &name() const { return name_; }

  /// Enqueues the kernel on `stream` (the current device must be the module's). `args`
  /// points to one pointer per kernel parameter, each to the parameter's value.
  Error launch(const LaunchShape &shape, const Stream &stream, void **args) const;

private:
  friend class KernelModule;
  Kernel(cudaKernel_t kernel, std::string name) : kernel_(kernel), name_(std::move(name)) {}

  cudaKernel_t kernel_;
  std::string name_;
};

class KernelModule {
public:
  /// Loads `image` into the current device; `label` names it in errors (e.g. the plan file).
  static Expected<KernelModule> load(std::span<const std::byte> image, std::string label);

  KernelModule(KernelModule &&other) noexcept;
  KernelModule &operator=(KernelModule &&other) noexcept;
  KernelModule(const KernelModule &) = delete;
  KernelModule &operator=(const KernelModule &) = delete;
  ~KernelModule();

  Expected<Kernel> kernel(std::string_view name) const;

  KernelImageKind kind() const { return kind_; }
  const std::string &label() const { return label_; }
  /// The number of kernels the image defines.
  unsigned kernelCount() const { return kernelCount_; }

private:
  KernelModule(cudaLibrary_t library, KernelImageKind kind, std::string label)
      : library_(library), kind_(kind), label_(std::move(label)) {}

  cudaLibrary_t library_ = nullptr;
  KernelImageKind kind_;
  std::string label_;
  unsigned kernelCount_ = 0;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_KERNELMODULE_H

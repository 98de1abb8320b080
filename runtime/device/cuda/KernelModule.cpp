//===- KernelModule.cpp - Loaded GPU code and its kernels ----------------===//

#include "runtime/device/cuda/KernelModule.h"

#include "runtime/device/cuda/CudaError.h"
#include "runtime/device/cuda/Stream.h"

#include <cstring>
#include <utility>

namespace mtc::rt::cuda {

std::string_view kernelImageKindName(KernelImageKind kind) {
  switch (kind) {
  case KernelImageKind::Ptx:
    return "PTX";
  case KernelImageKind::Cubin:
    return "cubin";
  case KernelImageKind::Fatbin:
    return "fatbin";
  }
  return "?";
}

Expected<KernelImageKind> classifyKernelImage(std::span<const std::byte> image) {
  if (image.empty())
    return makeError("the GPU code image is empty");
  auto startsWith = [&](std::initializer_list<unsigned char> magic) {
    if (image.size() < magic.size())
      return false;
    size_t i = 0;
    for (unsigned char c : magic)
      if (std::to_integer<unsigned char>(image[i++]) != c)
        return false;
    return true;
  };
  if (startsWith({0x7f, 'E', 'L', 'F'}))
    return KernelImageKind::Cubin;
  if (startsWith({0x50, 0xed, 0x55, 0xba}))
    return KernelImageKind::Fatbin;
  std::string_view text(reinterpret_cast<const char *>(image.data()), image.size());
  if (text.find(".version") != std::string_view::npos)
    return KernelImageKind::Ptx;
  return makeError("the GPU code image (", image.size(),
                   " bytes) is neither PTX (no .version directive), a cubin nor a fatbin");
}

Error checkLaunchShape(const LaunchShape &shape) {
  static constexpr char kAxes[] = {'x', 'y', 'z'};
  for (int i = 0; i < 3; ++i) {
    if (shape.grid[i] == 0 || shape.block[i] == 0)
      return makeError("launch: grid and block sizes must be at least 1 (", kAxes[i], ": grid ",
                       shape.grid[i], ", block ", shape.block[i], ")");
  }
  uint64_t threads = uint64_t(shape.block[0]) * shape.block[1] * shape.block[2];
  if (threads > 1024 || shape.block[0] > 1024 || shape.block[1] > 1024 || shape.block[2] > 64)
    return makeError("launch: block ", shape.block[0], "x", shape.block[1], "x", shape.block[2],
                     " exceeds 1024 threads per block (x, y <= 1024, z <= 64)");
  if (shape.grid[0] > 0x7fffffffu || shape.grid[1] > 65535 || shape.grid[2] > 65535)
    return makeError("launch: grid ", shape.grid[0], "x", shape.grid[1], "x", shape.grid[2],
                     " exceeds the limits (x < 2^31, y and z <= 65535)");
  return Error::success();
}

Error Kernel::launch(const LaunchShape &shape, const Stream &stream, void **args) const {
  // The message is built only on failure: launches are the executor's hot path.
  auto what = [&] { return concat("launching kernel '", name_, "'"); };
  if (Error e = checkLaunchShape(shape); !e.ok())
    return std::move(e).withContext(what());
  dim3 grid(shape.grid[0], shape.grid[1], shape.grid[2]);
  dim3 block(shape.block[0], shape.block[1], shape.block[2]);
  // A cudaKernel_t is accepted where cudaLaunchKernel takes a function (CUDA >= 12.0).
  cudaError_t status = cudaLaunchKernel(reinterpret_cast<const void *>(kernel_), grid, block, args,
                                        shape.dynamicSharedBytes, stream.handle());
  if (status != cudaSuccess)
    return cudaStatus(status, what());
  return Error::success();
}

Expected<KernelModule> KernelModule::load(std::span<const std::byte> image, std::string label) {
  Expected<KernelImageKind> kind = classifyKernelImage(image);
  if (!kind)
    return kind.takeError().withContext(concat("loading ", label));
  // PTX is passed as a NUL-terminated string; a cubin or fatbin carries its own size.
  std::string ptx;
  const void *code = image.data();
  if (*kind == KernelImageKind::Ptx) {
    ptx.assign(reinterpret_cast<const char *>(image.data()), image.size());
    if (ptx.find('\0') != std::string::npos)
      return makeError("loading ", label, ": the PTX text contains a NUL byte");
    code = ptx.c_str();
  }
  cudaLibrary_t library = nullptr;
  if (Error e =
          cudaStatus(cudaLibraryLoadData(&library, code, nullptr, nullptr, 0, nullptr, nullptr, 0),
                     concat("loading ", label, " (", kernelImageKindName(*kind), ", ", image.size(),
                            " bytes)"));
      !e.ok())
    return e;
  // Owned from here on, so that an early return unloads it.
  KernelModule module(library, *kind, std::move(label));
  if (Error e = cudaStatus(cudaLibraryGetKernelCount(&module.kernelCount_, library),
                           concat("reading the kernels of ", module.label_));
      !e.ok())
    return e;
  return module;
}

KernelModule::KernelModule(KernelModule &&other) noexcept
    : library_(std::exchange(other.library_, nullptr)), kind_(other.kind_),
      label_(std::move(other.label_)), kernelCount_(other.kernelCount_) {}

KernelModule &KernelModule::operator=(KernelModule &&other) noexcept {
  if (this != &other) {
    if (library_)
      (void)cudaLibraryUnload(library_);
    library_ = std::exchange(other.library_, nullptr);
    kind_ = other.kind_;
    label_ = std::move(other.label_);
    kernelCount_ = other.kernelCount_;
  }
  return *this;
}

KernelModule::~KernelModule() {
  if (library_)
    (void)cudaLibraryUnload(library_);
}

Expected<Kernel> KernelModule::kernel(std::string_view name) const {
  std::string key(name);
  cudaKernel_t kernel = nullptr;
  cudaError_t status = cudaLibraryGetKernel(&kernel, library_, key.c_str());
  if (status == cudaErrorSymbolNotFound) {
    (void)cudaGetLastError(); // reported here: the thread's next CUDA call must not see it
    return makeError("kernel '", key, "' not found in ", label_);
  }
  if (Error e = cudaStatus(status, concat("looking up kernel '", key, "' in ", label_)); !e.ok())
    return e;
  return Kernel(kernel, std::move(key));
}

} // namespace mtc::rt::cuda

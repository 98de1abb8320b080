//===- CudaLayer.cpp - Loading the CUDA device layer ----------------------===//
//
// The loading side of CudaLayer.h: linked into mtrun, with no CUDA library of its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/CudaLayer.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace mtc::rt::cuda {

Expected<CudaLayer> CudaLayer::load(const std::string &path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return makeError("the CUDA layer ", path, " is missing (build the project with the CUDA "
                     "toolkit, or run on the CPU with --device cpu)");
  if (!std::filesystem::is_regular_file(path, ec))
    return makeError("the CUDA layer ", path, " is not a file");
  // Never closed (CudaLayer.h says why).
  void *module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!module) {
    const char *why = ::dlerror();
    return makeError("cannot load the CUDA layer ", path, ": ", why ? why : "unknown error");
  }
  using EntryPoint = const CudaLayerFunctions *(*)();
  auto entry = reinterpret_cast<EntryPoint>(::dlsym(module, kCudaLayerEntryPoint));
  if (!entry)
    return makeError(path, " is not an mtc CUDA layer (it has no '", kCudaLayerEntryPoint,
                     "')");
  const CudaLayerFunctions *functions = entry();
  if (!functions || functions->abiVersion != kCudaLayerAbiVersion)
    return makeError("the CUDA layer ", path, " is of another build (ABI version ",
                     functions ? int64_t(functions->abiVersion) : int64_t(-1), ", this program's ",
                     int64_t(kCudaLayerAbiVersion), "): rebuild the project");
  return CudaLayer(functions);
}

Expected<std::string> CudaLayer::besideProgram() {
  std::error_code ec;
  std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return makeError("cannot find this program's own path (/proc/self/exe): ", ec.message());
  return (program.parent_path().parent_path() / "lib" / "libmtc-cuda.so").string();
}

} // namespace mtc::rt::cuda

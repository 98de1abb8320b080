//===- CudaLayer.h - The CUDA device layer as a loadable module ---*- C++ -*-===//
//
// The CUDA device layer (this folder) links the CUDA runtime, cuBLAS, cuBLASLt and NCCL.
// Mapping and relocating those costs every process that links them about a quarter of a
// second and 230 MB of resident memory at start-up, whether it touches a GPU or not, and a
// program linked against them does not start where they are missing. So mtrun does not link
// the layer: it is a module of its own (libmtc-cuda.so, in the build's lib/ folder beside
// bin/mtrun), which mtrun opens only for a run that may use a GPU (`--device cuda`, or a
// plan with CUDA host code and no `--device`).
//
// This header is the whole interface between the two. The module's one exported function,
// `mtc_cuda_layer`, returns a table of the layer's entry points. Both sides are built from
// the same sources by the same build, so the table passes the runtime's C++ types (Plan,
// Error, DeviceBackend); its ABI version guards against a module of another build. The
// module stays loaded until the process exits: the trainer it creates, the plan's host code
// that imports its launch functions and the CUDA runtime's exit handlers all outlive any
// point where it could be closed.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUDALAYER_H
#define MTC_RUNTIME_DEVICE_CUDA_CUDALAYER_H

#include "runtime/comm/Rendezvous.h"
#include "runtime/exec/DeviceTrainer.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace mtc::rt::cuda {

/// This rank's place in its job, which the trainer needs beyond runTraining's inputs: the
/// job's rendezvous store (the NCCL world's bootstrap; unused by a job of one rank), the
/// world rank and size (the Gloo world's), the local rank (which GPU) and --comm-timeout
/// (how long a collective may wait for its peers).
struct CudaJob {
  JobStore store;
  int rank = 0, size = 1;
  int localRank = 0;
  std::chrono::milliseconds timeout{60000};
};

/// Raised whenever the table or a type it passes changes layout.
inline constexpr uint32_t kCudaLayerAbiVersion = 1;

/// The name of the function the module exports: `const CudaLayerFunctions *()`.
inline constexpr const char *kCudaLayerEntryPoint = "mtc_cuda_layer";

/// The layer's entry points (CudaTrainer.h and CudaDevice.h document them).
struct CudaLayerFunctions {
  uint32_t abiVersion;
  Error (*checkPlan)(const Plan &plan, int64_t worldSize);
  Expected<int> (*visibleDeviceCount)();
  Error (*checkDevicesForLocalRanks)(int localRanks, int deviceCount);
  DeviceBackend (*backend)(CudaJob job);
};

/// The layer, loaded into this process.
class CudaLayer {
public:
  /// Opens the module at `path` (RTLD_GLOBAL: the plan's CUDA host code, loaded later,
  /// imports the layer's launch functions from the process) and reads its table. The
  /// error names the path and why: missing, not loadable (dlerror: a CUDA library it
  /// needs is absent, say), without the entry point, or of another ABI version.
  static Expected<CudaLayer> load(const std::string &path);

  /// Where the build puts the module for the program running: `../lib/libmtc-cuda.so`
  /// from the folder of /proc/self/exe.
  static Expected<std::string> besideProgram();

  const CudaLayerFunctions &functions() const { return *functions_; }

private:
  explicit CudaLayer(const CudaLayerFunctions *functions) : functions_(functions) {}

  const CudaLayerFunctions *functions_;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUDALAYER_H

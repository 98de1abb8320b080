//===- CudaDevice.h - The CUDA device a rank runs on ------------*- C++ -*-===//
//
// The CUDA device layer (docs/runtime.md, "The CUDA device layer") is written against the
// CUDA *runtime* API, libcudart from the toolkit, and never against the driver API's
// link-time symbols:
//
//  - libcudart opens the driver (libcuda.so.1) with dlopen at its first call, so mtrun and
//    the tests link and start on a machine without a driver; there every call returns a
//    status (cudaErrorInsufficientDriver, cudaErrorNoDevice) that becomes an Error value.
//    Linking libcuda directly would make the loader refuse to start the program instead.
//  - Kernels load through the runtime's library-management API (cudaLibraryLoadData,
//    cudaLibraryGetKernel, cudaLaunchKernel with the cudaKernel_t): a library is
//    context-independent and loads into the primary context of whichever device is current,
//    the same primary context cuBLASLt and NCCL use. Driver entry points fetched with
//    cudaGetDriverEntryPointByVersion would work as well, but would need their own context
//    handling, function-pointer table and CUresult mapping for no gain.
//
// CudaDevice picks the device of a rank by its local rank, makes it current and reports
// what it is. It owns nothing: the runtime API's primary context lives as long as the process.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUDADEVICE_H
#define MTC_RUNTIME_DEVICE_CUDA_CUDADEVICE_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <string>

namespace mtc::rt::cuda {

/// The number of CUDA devices this process sees; an Error starting with "no CUDA device"
/// when there is none or the driver cannot be used (meansNoDevice; the status says which).
Expected<int> visibleDeviceCount();

/// The device of local rank `localRank` among `deviceCount` visible devices: the only one
/// when the launcher gave each process one device (CUDA_VISIBLE_DEVICES per rank), otherwise
/// device `localRank`. More local ranks than devices is an error (two ranks on one GPU would
/// halve its memory behind the memory plan's back).
Expected<int> deviceOrdinalForLocalRank(int localRank, int deviceCount);

/// For a launcher that starts `localRanks` ranks on this host, each seeing all `deviceCount`
/// devices (mtrun --nodes: no CUDA_VISIBLE_DEVICES per rank): an error unless every local
/// rank gets a GPU of its own (deviceOrdinalForLocalRank would put them all on a single
/// visible device, which it reads as one given to each process).
Error checkDevicesForLocalRanks(int localRanks, int deviceCount);

/// Free and total device memory, as the driver reports them (other processes included).
struct DeviceMemory {
  int64_t freeBytes = 0;
  int64_t totalBytes = 0;
};

class CudaDevice {
public:
  /// Picks the device of `localRank` (deviceOrdinalForLocalRank), makes it current on the
  /// calling thread and reads its properties.
  static Expected<CudaDevice> forLocalRank(int localRank);

  int ordinal() const { return ordinal_; }
  const std::string &name() const { return name_; }
  int64_t totalMemoryBytes() const { return totalMemoryBytes_; }
  /// Compute capability, e.g. 9.0 for sm_90.
  int computeMajor() const { return computeMajor_; }
  int computeMinor() const { return computeMinor_; }
  int multiprocessors() const { return multiprocessors_; }

  /// "NVIDIA H100 80GB HBM3 (device 0, sm_90, 132 SMs, 79.1 GiB)".
  std::string describe() const;

  /// Makes this device current on the calling thread (each thread that issues work must).
  Error makeCurrent() const;
  Expected<DeviceMemory> memory() const;

private:
  CudaDevice() = default;

  int ordinal_ = 0;
  std::string name_;
  int64_t totalMemoryBytes_ = 0;
  int computeMajor_ = 0, computeMinor_ = 0;
  int multiprocessors_ = 0;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUDADEVICE_H

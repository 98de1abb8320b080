//===- BlasCore.h - Which OpenBLAS kernels this CPU should run -*- C++ -*-===//
//
// OpenBLAS (Debian 12's 0.3.21, built with DYNAMIC_ARCH) picks its kernels by the CPU's
// model number when the library loads, and falls back on its oldest x86-64 kernels
// (Prescott: SSE3, no AVX) for a model newer than itself, whatever the CPU's features: on
// this project's machines (Intel family 6 model 207) its sgemm runs at 15-30 GFLOP/s on one
// core instead of 95-127 with its AVX512 kernels. OpenBLAS's documented remedy is the
// environment variable OPENBLAS_CORETYPE, read only when the library loads, so a program
// that finds the fallback sets it from the CPU's features and executes itself again
// (mtrun, and mtc for `mtc calibrate`). A user's own OPENBLAS_CORETYPE is never changed.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_BLASCORE_H
#define MTC_RUNTIME_SUPPORT_BLASCORE_H

#include <optional>
#include <string_view>

namespace mtc::rt {

/// The instruction-set extensions that decide which OpenBLAS kernels a CPU can run.
struct CpuFeatures {
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx2 = false, fma = false;

  /// This CPU's (CPUID).
  static CpuFeatures host();
};

/// The OPENBLAS_CORETYPE to run instead of `picked` (openblas_get_corename()): SkylakeX
/// (AVX512 F/BW/DQ/VL) or Haswell (AVX2 and FMA) when OpenBLAS fell back on Prescott on a CPU
/// with them; none when OpenBLAS recognised the CPU (it picked something else) or the CPU
/// has neither.
std::optional<std::string_view> fallbackBlasCore(std::string_view picked, const CpuFeatures &cpu);

/// When the environment has no OPENBLAS_CORETYPE and fallbackBlasCore(picked, host) names a
/// core: sets the variable and executes this program again with `argv` (/proc/self/exe:
/// same process, same arguments), so it never returns then. Returns otherwise, and also
/// when the execution fails (the program goes on with the kernels OpenBLAS picked).
void reexecForBlasCore(std::string_view picked, char **argv);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_BLASCORE_H

//===- BlasCore.cpp - Which OpenBLAS kernels this CPU should run ----------===//

#include "runtime/support/BlasCore.h"

#include <cstdlib>
#include <string>

#include <strings.h>
#include <unistd.h>

namespace mtc::rt {

CpuFeatures CpuFeatures::host() {
  CpuFeatures cpu;
#if defined(__x86_64__)
  __builtin_cpu_init();
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
#endif
  return cpu;
}

std::optional<std::string_view> fallbackBlasCore(std::string_view picked,
                                                 const CpuFeatures &cpu) {
  if (picked.size() != 8 || ::strncasecmp(picked.data(), "prescott", 8) != 0)
    return std::nullopt;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl)
    return "SkylakeX";
  if (cpu.avx2 && cpu.fma)
    return "Haswell";
  return std::nullopt;
}

void reexecForBlasCore(std::string_view picked, char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  std::optional<std::string_view> core = fallbackBlasCore(picked, CpuFeatures::host());
  if (!core)
    return;
  if (::setenv("OPENBLAS_CORETYPE", std::string(*core).c_str(), 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // Not executed (no /proc, say): go on as this process, with the variable taken back so
  // that child processes do not differ from it.
  ::unsetenv("OPENBLAS_CORETYPE");
}

} // namespace mtc::rt

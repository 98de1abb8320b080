//===- KernelThreads.cpp - How many threads a rank's kernels run on -------===//

#include "runtime/exec/KernelThreads.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <thread>

namespace mtc::rt {

Expected<int> defaultThreadsPerRank(const EnvironmentLookup &env, int cores, int ranksOnNode) {
  if (std::optional<std::string> value = env("OMP_NUM_THREADS")) {
    int n = 0;
    auto [end, err] = std::from_chars(value->data(), value->data() + value->size(), n);
    if (err != std::errc() || end != value->data() + value->size() || n < 1 ||
        n > kMaxThreadsPerRank)
      return makeError("OMP_NUM_THREADS must be an integer from 1 to ", kMaxThreadsPerRank,
                       " (or give --threads-per-rank N), got '", *value, "'");
    return n;
  }
  return std::max(1, cores / std::max(1, ranksOnNode));
}

int availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void setKernelThreads(int threads) {
  omp_set_num_threads(threads);
  // Idle OpenMP threads sleep at once instead of spinning for libomp's default 200 ms: the
  // GEMMs between two parallel loops run on OpenBLAS's threads, which would otherwise share
  // the cores with spinning OpenMP threads (gpt-tiny on two threads trained 3-5x slower).
  kmp_set_blocktime(0);
  openblas_set_num_threads(threads);
}

} // namespace mtc::rt

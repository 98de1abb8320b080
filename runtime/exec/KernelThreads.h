//===- KernelThreads.h - How many threads a rank's kernels run on -*- C++ -*-===//
//
// A rank runs its compiled kernels' parallel loops on OpenMP threads (LLVM's libomp, which the
// kernels' shared object links) and its f32 GEMMs on OpenBLAS's threads. Both follow one number,
// `mtrun --threads-per-rank N`; without it, OMP_NUM_THREADS (the OpenMP convention, which
// torchrun also sets), else the cores this process may run on shared among the ranks of
// this node. The results do not depend on the number: a parallel loop splits whole
// iterations among the threads, each f32 GEMM call computes its sums in the same order, and
// the bf16 GEMM (GemmBf16.cpp, oneDNN) shares fixed tiles of whole sums among the same
// OpenMP threads.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_KERNELTHREADS_H
#define MTC_RUNTIME_EXEC_KERNELTHREADS_H

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/support/Error.h"

namespace mtc::rt {

/// The largest number of threads per rank accepted.
inline constexpr int kMaxThreadsPerRank = 4096;

/// The threads per rank when none is asked for: OMP_NUM_THREADS from `env` when set (an
/// integer from 1 to kMaxThreadsPerRank, else an error naming the variable), else `cores`
/// divided among `ranksOnNode` ranks, at least 1.
Expected<int> defaultThreadsPerRank(const EnvironmentLookup &env, int cores, int ranksOnNode);

/// The cores this process may run on (its CPU affinity), at least 1.
int availableCores();

/// Runs the calling thread's next kernels on `threads` threads: the OpenMP team of the
/// kernels' parallel loops and OpenBLAS's threads.
void setKernelThreads(int threads);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_KERNELTHREADS_H

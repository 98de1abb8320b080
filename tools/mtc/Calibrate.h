//===- Calibrate.h - measuring this host for the cost model -----*- C++ -*-===//
//
// `mtc calibrate`: a cluster file for this host (docs/cost-model.md, "mtc calibrate"),
// measured on one core as mtrun's ranks run: the GEMM curve with the BLAS the runtime calls
// (cblas_sgemm, one thread), the memory bandwidth of a streaming triad, the cores and the
// memory. The links (Gloo between local ranks) and the per-kernel overhead are not measured
// yet: they are taken from `base` (the shipped host preset).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTC_CALIBRATE_H
#define MTC_TOOLS_MTC_CALIBRATE_H

#include "compiler/costmodel/Cluster.h"

#include "llvm/Support/raw_ostream.h"

namespace mtc {

/// Measures this host, printing each measurement to `log`, into a copy of `base`.
costmodel::Cluster calibrateHost(const costmodel::Cluster &base, llvm::raw_ostream &log);

} // namespace mtc

#endif // MTC_TOOLS_MTC_CALIBRATE_H

//===- TraceWriter.h - the predicted step as a Chrome trace -----*- C++ -*-===//
//
// `mtc simulate --trace FILE`: the simulated step in the Trace Event Format that
// chrome://tracing and Perfetto open (the format mtrun --trace writes for a measured step):
// one thread per pipeline stage, one complete event ("ph": "X") per task, in microseconds.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_TRACEWRITER_H
#define MTC_COMPILER_COSTMODEL_TRACEWRITER_H

#include "compiler/costmodel/StepModel.h"

namespace mtc::costmodel {

llvm::json::Value simulationTrace(const Simulation &simulation);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_TRACEWRITER_H

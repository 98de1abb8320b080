//===- PlanWriter.h - writing the plan directory ----------------*- C++ -*-===//
//
// Writes docs/plan-format.md: MANIFEST, plan.json and program.mlir, from the module after
// the training pipeline. The directory appears atomically: it is written under a temporary
// name next to the destination and renamed into place, so a reader never sees half a plan.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PLAN_PLANWRITER_H
#define MTC_COMPILER_PLAN_PLANWRITER_H

#include "compiler/analysis/ModelStats.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mtc {

struct PlanSource {
  std::string path;
  std::string contents;
  std::string compilerVersion;
};

/// Compiled step functions: the bytes of `kernels/x86_64.so` and how to call them
/// (CallingConvention.h).
struct PlanKernels {
  std::string x86SharedObject;
  llvm::json::Object callingConvention;
};

/// Writes the plan of `trained` (the output of buildTrainingPipeline; `stats` are those of
/// the frontend's module) to the directory `path`, replacing an existing plan there;
/// `kernels` (optional) adds the compiled steps.
llvm::Error writePlan(mlir::ModuleOp trained, const ModelStats &stats, const PlanSource &source,
                      llvm::StringRef path, const PlanKernels *kernels = nullptr);

/// Lowercase hex SHA-256 of `bytes`.
std::string sha256Hex(llvm::StringRef bytes);

} // namespace mtc

#endif // MTC_COMPILER_PLAN_PLANWRITER_H

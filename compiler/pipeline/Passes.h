//===- Passes.h - pipeline-parallel passes ----------------------*- C++ -*-===//

#ifndef MTC_COMPILER_PIPELINE_PASSES_H
#define MTC_COMPILER_PIPELINE_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mts/IR/MTSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mtc::pipeline {

#define GEN_PASS_DECL
#include "compiler/pipeline/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/pipeline/Passes.h.inc"

} // namespace mtc::pipeline

#endif // MTC_COMPILER_PIPELINE_PASSES_H

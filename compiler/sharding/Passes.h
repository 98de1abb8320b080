//===- Passes.h - sharding: layouts and partitioning ------------*- C++ -*-===//

#ifndef MTC_COMPILER_SHARDING_PASSES_H
#define MTC_COMPILER_SHARDING_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mtc::sharding {

#define GEN_PASS_DECL
#include "compiler/sharding/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/sharding/Passes.h.inc"

} // namespace mtc::sharding

#endif // MTC_COMPILER_SHARDING_PASSES_H

//===- UpdateInPlace.h - which results a step updates in place --*- C++ -*-===//
//
// The rule mtc-update-in-place compiles by, for the plan writer: the parameters and states
// a function returns new values of are updated in their input buffers, and those results
// are no outputs of the compiled function.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_COMMON_UPDATEINPLACE_H
#define MTC_COMPILER_CODEGEN_COMMON_UPDATEINPLACE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <utility>

namespace mtc::codegen {

/// For each result of `func` that is the new value of an argument, [result, argument]: a
/// result carrying `mt.param = @S` or `mt.state = @S` where an argument carries the same.
llvm::SmallVector<std::pair<unsigned, unsigned>> updatedArguments(mlir::func::FuncOp func);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_COMMON_UPDATEINPLACE_H

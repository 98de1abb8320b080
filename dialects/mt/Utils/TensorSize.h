//===- TensorSize.h - the bytes of an mt tensor -----------------*- C++ -*-===//
//
// The memory predictions (the stage cut, the plan's buffer and memory tables, the search's
// layer costs, the saved activations, the communication volume) all count a tensor as its
// elements times whole bytes per element, as the runtime stores them: one rule, so their
// figures agree.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_UTILS_TENSORSIZE_H
#define MTC_DIALECTS_MT_UTILS_TENSORSIZE_H

#include "mlir/IR/Types.h"

#include <cstdint>

namespace mtc::mt {

/// The bytes of one element of `elementType`: its bit width rounded up to whole bytes (so
/// i1 takes one byte, as the runtime holds masks); 0 for a type that is no integer or float
/// (index). For mt's element types (f64, f32, f16, bf16, i64, i32, i8, i1) this is the
/// width / 8 the callers computed before, with i1 at 1.
int64_t getElementSizeInBytes(mlir::Type elementType);

/// The bytes of a dense buffer of `type` when it is an `!mt.tensor` (sizes are static):
/// its elements times getElementSizeInBytes; 0 for any other type.
int64_t getSizeInBytes(mlir::Type type);

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_TENSORSIZE_H

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
#include "llvm/ADT/StringRef.h"

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

/// Discardable attribute (a TypeAttr: bf16 or f16) that mt-decompose puts on the ops of a
/// low-precision composite op's decomposition (a norm, softmax, attention, cross-entropy of
/// bf16 or f16 tensors), which it computes in f32: the casts to f32 and back, and every op
/// between them. The f32 there is the arithmetic of what one fused kernel does (Megatron's
/// fused softmax and norms, FlashAttention), not what memory holds: the tensors between
/// kernels are in the low type, so the cost model (compiler/analysis/FunctionCost.h) counts
/// these ops' f32 tensors at the low type's size and their casts as moving nothing.
constexpr llvm::StringLiteral kStoredTypeAttrName = "mt.stored_as";

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_TENSORSIZE_H

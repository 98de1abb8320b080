//===- TensorBuilder.h - mt ops with inferred types -------------*- C++ -*-===//
//
// Gradient code builds many small mt ops whose result types follow from their operands
// (named broadcasting, reductions, reorderings: the ops infer them). This wraps an
// OpBuilder and a location so each rule reads like the formula it implements.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_UTILS_TENSORBUILDER_H
#define MTC_DIALECTS_MT_UTILS_TENSORBUILDER_H

#include "dialects/mt/IR/MTOps.h"
#include "mlir/IR/Builders.h"

namespace mtc::mt {

class TensorBuilder {
public:
  TensorBuilder(mlir::OpBuilder &builder, mlir::Location loc) : b(builder), loc(loc) {}

  static mt::NamedTensorType typeOf(mlir::Value value) {
    return llvm::cast<mt::NamedTensorType>(value.getType());
  }

  /// A scalar of `like`'s element type.
  mlir::Value scalar(double value, mlir::Value like);
  /// Zeros of `type`.
  mlir::Value zeros(mt::NamedTensorType type);

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value pow(mlir::Value lhs, mlir::Value rhs);
  mlir::Value greater(mlir::Value lhs, mlir::Value rhs);
  mlir::Value neg(mlir::Value value);
  mlir::Value exp(mlir::Value value);
  mlir::Value log(mlir::Value value);
  mlir::Value sigmoid(mlir::Value value);
  mlir::Value rsqrt(mlir::Value value);
  mlir::Value sqrt(mlir::Value value);
  mlir::Value cos(mlir::Value value);
  mlir::Value max(mlir::Value lhs, mlir::Value rhs);
  mlir::Value min(mlir::Value lhs, mlir::Value rhs);
  /// The sum of every element: a scalar.
  mlir::Value sumAll(mlir::Value value);

  mlir::Value reduceSum(mlir::Value value, llvm::ArrayRef<llvm::StringRef> over);
  mlir::Value reduceMean(mlir::Value value, llvm::ArrayRef<llvm::StringRef> over);
  mlir::Value reduceMax(mlir::Value value, llvm::ArrayRef<llvm::StringRef> over);
  /// log(sum(exp(value) over dim)) in the stable form max + log(sum(exp(value - max))).
  mlir::Value logSumExp(mlir::Value value, llvm::StringRef dim);
  mlir::Value contract(mlir::Value lhs, mlir::Value rhs, llvm::ArrayRef<llvm::StringRef> over);
  /// `value` with elements of type `element` (`value` itself when it has them).
  mlir::Value castTo(mlir::Value value, mlir::Type element);

  /// `value` with exactly `target`'s dimensions in `target`'s order (a no-op when it already
  /// has them): reorders, or replicates along `target`'s missing dimensions.
  mlir::Value broadcastTo(mlir::Value value, mt::NamedTensorType target);
  /// The adjoint of broadcasting: sums `grad` over the dimensions `target` lacks, then
  /// reorders to `target`.
  mlir::Value sumTo(mlir::Value grad, mt::NamedTensorType target);
  /// Reorders `value` (same dimension set) to `target`'s order.
  mlir::Value transposeTo(mlir::Value value, mt::NamedTensorType target);

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_TENSORBUILDER_H

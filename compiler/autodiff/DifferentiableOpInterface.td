//===- DifferentiableOpInterface.td - VJPs of mt ops --------*- tablegen -*-===//

#ifndef MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_TD
#define MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mtc::autodiff";
  let description = [{
    An op whose vector-Jacobian product can be written as `mt` ops. Reverse-mode autodiff
    calls `buildVJP` once per op, in reverse program order, with the gradients of the op's
    results; the op appends the gradients of its operands.

    The rules are attached to the `mt` ops as external models (VJPRules.cpp), so the dialect
    itself does not depend on autodiff.
  }];
  let methods = [
    InterfaceMethod<[{
      Builds the gradients of the operands at the builder's insertion point.
      `resultGrads` has one entry per result, null where no gradient reaches that result
      (at least one is non-null). On success `operandGrads` holds one entry per operand,
      each of the operand's exact type, or null where the operand gets no gradient (integer
      operands, masks).
    }], "::mlir::LogicalResult", "buildVJP",
    (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
         "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_TD

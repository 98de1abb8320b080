//===- Passes.td - passes both backends run ------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_CODEGEN_COMMON_PASSES_TD
#define MTC_COMPILER_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def CopyRepeatedResultsPass : Pass<"mtc-copy-repeated-results", "::mlir::ModuleOp"> {
  let summary = "Give every tensor a function returns more than once its own copy";
  let description = [{
    On tensors, before bufferization. A `func.return` whose operands repeat a ranked tensor
    value keeps the first occurrence and returns, at each further position, a `linalg.copy`
    of the value into a fresh `tensor.empty`. `buffer-results-to-out-params` turns every
    result into a caller-allocated out-parameter and cannot hoist one buffer into two of
    them (upstream crashes on it); after this pass every out-parameter has its own buffer,
    written once.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

#endif // MTC_COMPILER_CODEGEN_COMMON_PASSES_TD

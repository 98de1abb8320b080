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

def UpdateInPlacePass : Pass<"mtc-update-in-place", "::mlir::ModuleOp"> {
  let summary = "Write an optimizer step's new parameters and states into their inputs";
  let description = [{
    On tensors, before bufferization. A function result carrying `mt.param = @S` or
    `mt.state = @S` where an argument carries the same attribute is that argument's new
    value (the optimizer steps, mt-optimizer and mt-pipeline-optimizer). Such a function
    must have a `grad_norm` (a result or an argument with `mt.buffer = "grad_norm"`): the
    ops that compute only the new values move into an `scf.if` taken when the norm is
    finite (the else branch yields the arguments unchanged), and each new value is
    materialized in its argument (`bufferization.materialize_in_destination`). What the
    other results need stays: their backward slices and every op that may write a buffer
    a kept op uses (a collective writes its output memref, which `bufferization.to_tensor`
    or the next collective reads with no def-use edge from the call). Once
    bufferized (after `eliminate-empty-tensors`, which lets the fused update kernels write
    straight into the argument buffers), mtc-drop-in-place-results erases those results:
    the caller's parameter and state buffers are updated in place, and a step whose
    gradient norm is inf or NaN (an fp16 overflow) leaves them as they were. The
    optimizer keeps no second copy of the parameters and states.

    With `select-in-kernels` (the GPU backend, whose host code never reads device memory
    and so cannot branch on the norm) nothing moves: each new value's producer, which must
    be a `linalg.generic` reading the argument where it writes the value, takes the norm as
    one more (0-d) input and yields the argument's element when the norm is not finite.
  }];
  let options = [
    Option<"selectInKernels", "select-in-kernels", "bool", /*default=*/"false",
           "Guard each update inside its kernel instead of branching around the update">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"];
}

def DropInPlaceResultsPass : Pass<"mtc-drop-in-place-results", "::mlir::ModuleOp"> {
  let summary = "Erase the results that return an argument updated in place";
  let description = [{
    On buffers, after one-shot bufferization and before `buffer-results-to-out-params`.
    A result carrying `mt.param = @S` or `mt.state = @S` that returns the function's own
    argument carrying the same attribute (mtc-update-in-place's work) is erased: the
    caller passed that buffer in and finds the new value there. Such a result returning
    another buffer is an error: the plan lists no output for it. Upstream's
    `drop-equivalent-buffer-results` leaves public functions alone, and every step
    function is public.
  }];
}

#endif // MTC_COMPILER_CODEGEN_COMMON_PASSES_TD

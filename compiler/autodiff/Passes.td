//===- Passes.td - autodiff passes --------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_AUTODIFF_PASSES_TD
#define MTC_COMPILER_AUTODIFF_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTAutodiffPass : Pass<"mt-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the training step";
  let description = [{
    Differentiates the model's `forward` (the loss) with respect to every parameter.

    Each layer `@L` gets two functions, both marked `mt.layer_of = @L` so they read the
    layer's parameter instances: `@L.fwd` computes the layer and also returns the
    activations its backward needs (*saved* values), and `@L.bwd` takes the gradients of
    the layer's results and the saved values and returns the gradients of its inputs and
    of the parameters it reads (listed by the `mt.param_grads` attribute). Which forward
    values are saved and which recomputed in `@L.bwd` is the `recompute` policy:
    `none` saves every value the backward reads, `selective` recomputes attention from its
    saved inputs, `full` saves only the layer inputs and recomputes the whole layer.
    Under ring attention (`mt.parallel` with `cp_comm_type = p2p`) attention saves its
    log-sum-exp (`mt.attention ... save_lse`) for `mt.attention_grad`, whose partition
    rule then need not run the forward's ring again.

    `@forward_backward` has the arguments of `forward` and returns the loss followed by one
    gradient per `mt.param` in module order (named by its `mt.grads` attribute). It runs
    the layer stack with `mt.repeat @L.fwd`, whose stacked results hold every instance's
    saved values, and back with `mt.repeat @L.bwd ... {reverse}`, whose stacked results are
    the per-instance parameter gradients: a layer parameter's gradient has the leading
    `layers` dimension of the parameter storage.

    The backward starts from d(loss)/d(loss) = 1, or under `precision fp16` from
    `mt.loss_scale`, the runtime's loss scale: every gradient is then scaled by it, which
    keeps small gradients representable in f16, and the runtime divides it out in the
    optimizer step (dynamic loss scaling).

    Every differentiable op implements DifferentiableOpInterface (VJPRules.cpp).
  }];
  let options = [
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activation recomputation in layer backwards: none, selective or full">,
  ];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTSplitBackwardPass : Pass<"mt-split-backward", "::mlir::ModuleOp"> {
  let summary = "Split each layer backward into input-gradient and weight-gradient parts";
  let description = [{
    Zero-bubble pipeline schedules run a layer's backward in two parts: B, the gradients of
    the layer's inputs (which the previous stage waits for), and W, the gradients of its
    parameters (which can fill a bubble later). For every layer backward `@L.bwd` (a
    function with `mt.layer_of` and `mt.param_grads`) this pass adds:

    - `@L.bwd.input(args of @L.bwd) -> (input gradients, stash...)`: the ops the input
      gradients need, and
    - `@L.bwd.weight(args of @L.bwd but the result gradients, stash..., invariant args...)
      -> (parameter gradients)`: the remaining ops the parameter gradients need (the
      invariant arguments, the last ones of @L.bwd that its repeat passes unchanged to
      every layer, such as position ids, stay last),

    where the stash is every value of B that W reads, and every gradient of the layer's
    results (the leading arguments of @L.bwd) that W reads: W takes those only through
    the stash, so that a repeat of W, which carries nothing, gets each call's gradient
    stacked from B's repeat (for a contraction `y = x w`, B computes `dx = dy w^T` and W
    computes `dw = x^T dy` from the saved `x` and the stashed incoming `dy`). Every op of `@L.bwd` lands in exactly one part (ops
    needed by both are in B), so B followed by W computes exactly what `@L.bwd` computes.
    Both carry `mt.layer_of`; W carries `mt.param_grads`; `mt.backward_part` is "input" or
    "weight". `@L.bwd` itself stays (the single-stage step uses it).
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

#endif // MTC_COMPILER_AUTODIFF_PASSES_TD

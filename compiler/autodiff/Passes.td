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

    `@forward_backward` has the arguments of `forward` and returns the loss followed by one
    gradient per `mt.param` in module order (named by its `mt.grads` attribute). It runs
    the layer stack with `mt.repeat @L.fwd`, whose stacked results hold every instance's
    saved values, and back with `mt.repeat @L.bwd ... {reverse}`, whose stacked results are
    the per-instance parameter gradients: a layer parameter's gradient has the leading
    `layers` dimension of the parameter storage.

    Every differentiable op implements DifferentiableOpInterface (VJPRules.cpp).
  }];
  let options = [
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activation recomputation in layer backwards: none, selective or full">,
  ];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

#endif // MTC_COMPILER_AUTODIFF_PASSES_TD

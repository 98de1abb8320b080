//===- Passes.td - cross-dialect transforms -----------------*- tablegen -*-===//

#ifndef MTC_COMPILER_TRANSFORMS_PASSES_TD
#define MTC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTOutlineParametersPass : Pass<"mt-outline-parameters", "::mlir::ModuleOp"> {
  let summary = "Make every function a pure function of explicit parameter buffers";
  let description = [{
    Rewrites every `func.func` so that no `mt.param_ref` or `mt.assign` remains: the
    parameters and optimizer states a function uses become arguments and the ones it
    writes become results, the form an executor and kernel generation need.

    - **Arguments.** A function whose code uses the value of a parameter or state as it was
      on entry (an `mt.param_ref` before any `mt.assign` of the same symbol in the
      function, or a read by a function that one of its `mt.repeat` or `func.call` ops
      calls) gets one argument per such symbol, appended after its own arguments in module
      symbol order (the order of the `mt.param` / `mt.state` ops), with the argument
      attribute `mt.param = @symbol` or `mt.state = @symbol`. The argument has the type the
      function read: the instance type inside a layer function (`mt.layer`, `mt.layer_of`)
      for its own layer's parameters, all instances stacked along a leading `layers`
      dimension elsewhere; a state always has its storage type.
    - **Results.** A function that writes symbols (`mt.assign`, or a `func.call` of a
      function that does) gets one result per written symbol, its final value, appended
      after its own results in module symbol order, with the result attribute
      `mt.param = @symbol` / `mt.state = @symbol`. The `mt.assign` ops are removed; a read
      after a write in the same function uses the written value.
    - **`mt.repeat`.** When the callee gained arguments, the repeat passes them as stacked
      operands after its existing operands (the callee's new arguments come after its
      existing ones in the same order), and its `carried` attribute is set to the number of
      values it carried before. A layer parameter is passed as the caller's stacked value
      (the repeat must stack along `layers` and have as many calls as the layer has
      instances). A model parameter or a state read inside a layer is the same for every
      call and has no stacked form: the caller broadcasts it along the repeat's stacking
      dimension (`mt.broadcast`: one copy per call, which costs memory; a kind of repeat
      operand passed whole to every call would avoid it).
    - **`func.call`.** Gets the callee's new operands (the caller's current values) and
      results (which become the caller's current values of those symbols).

    The `mt.param` / `mt.state` ops stay: they carry the types, the initialisers and the
    optimizer's `mt.weight_decay`. The module gets the unit attribute `mt.outlined`, and
    the pass fails on a module that already has it. Function names do not change.

    Not supported, each reported as an error: parameter accesses inside nested regions or
    in functions of several blocks, `mt.assign` in a function a repeat calls (a scan has
    no place to return it), a layer parameter passed through a repeat inside its own layer
    or whose count or stacking dimension differs from the layer's instances, recursion.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTExpertLoadPass : Pass<"mt-expert-load", "::mlir::ModuleOp"> {
  let summary = "Return the tokens each expert is routed, per MoE layer, from the step";
  let description = [{
    Makes `forward_backward` (after mt-autodiff) also return how many tokens each MoE layer
    routes to each expert, the statistic Megatron-Core logs as `tokens_per_expert`.

    Every `mt.dispatch` of a layer forward that `forward_backward` repeats gets an
    `mt.expert_load` of its indices (i64 counts over its expert dimension, taken before any
    capacity drops a choice), returned by the layer forward as a stacked result after its
    existing ones; the `mt.repeat` stacks it over the layers (`[layers, experts]`), and
    `forward_backward` returns each such stack after its gradients, with the result
    attribute `mt.buffer = "expert_load"` (the plan's buffer kind). A layer with several
    dispatches gives one stack per dispatch, in program order; stacks of several repeats
    follow in the order of the repeats.

    Left alone: a module without a dispatch in its repeated layers (a dense model). Under
    pipeline parallelism mt-pipeline-chunks hands each chunk's forward the rows of its own
    layers.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTLogitsPass : Pass<"mt-logits", "::mlir::ModuleOp"> {
  let summary = "Add a `logits` entry function: forward up to its loss, for generation";
  let description = [{
    Adds `@logits(tokens) -> logits`, the model's `forward` without its loss: a copy of
    `forward` without its labels argument that returns the logits operand of its
    `mt.cross_entropy` instead of the loss, with the result attribute
    `mt.buffer = "logits"` (the plan's buffer kind). The logits keep the batch and sequence
    dimensions of the tokens, in their order, followed by the class dimension (an
    `mt.transpose` puts them in that order where the model computed them otherwise); they
    are f32 (an `mt.cast` widens the logits of a bf16 or f16 model, which is what the
    loss reads too). What only the loss needed (the cross-entropy, an auxiliary
    loss) is erased.

    The function has `forward`'s evaluation semantics: its dropouts are those of `forward`,
    which the runtime disables by calling without a dropout key, as it evaluates `forward`.
    After mt-pad-vocabulary the logits have the padded vocabulary, the padded classes
    masked to a large negative value as the loss sees them; the plan's `vocabulary_size`
    says how many are real.

    Left alone: a module that has a `logits` function already, one without `forward`, and
    one whose `forward` does not take the tokens then the labels, has no or several
    `mt.cross_entropy` ops, or uses the labels other than as the loss's labels (no function
    is added: such a model has nothing to generate from).
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

#endif // MTC_COMPILER_TRANSFORMS_PASSES_TD

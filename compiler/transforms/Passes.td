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

def MTLossMaskPass : Pass<"mt-loss-mask", "::mlir::ModuleOp"> {
  let summary = "Mask the loss at end-of-document tokens (Megatron's --eod-mask-loss)";
  let description = [{
    With `eod_mask_loss` in the module's `mt.train` (`train { eod_mask_loss on }`, `mtc
    compile --eod-mask-loss`), `forward` gets a third argument after the tokens and the
    labels, the loss mask: f32 with the labels' dimensions (the plan's input `loss_mask`),
    which every `mt.cross_entropy` of the labels argument takes as its `mask`. The loss is
    then Megatron's `sum(loss * mask) / sum(mask)` over the micro-batch; the runtime passes
    0 where the token is the end of document and 1 elsewhere (Megatron's
    `loss_mask[tokens == eod] = 0`), computed from the tokens it reads. Autodiff and the
    differentiated step take the argument as `forward` does; the positions of mask 0 have
    no gradient.

    Under pipeline parallelism mt-pipeline-chunks hands the mask, as every data argument, to
    the chunk functions reading it (those computing the loss).

    Without the setting (or with `eod_mask_loss off`) the module is left alone. Errors: a
    `forward` that does not take exactly the tokens and the labels, and one whose labels
    feed no `mt.cross_entropy`.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTResetDocumentsPass : Pass<"mt-reset-documents", "::mlir::ModuleOp"> {
  let summary = "Positions restarting at each document and attention within documents "
                "(Megatron's --reset-position-ids, --reset-attention-mask)";
  let description = [{
    Megatron packs documents into samples, each ended by the end-of-document token. With
    the module's unit attribute `mt.reset_position_ids` (`mtc compile
    --reset-position-ids`), `forward` gets one more argument after its data
    arguments (the tokens, the labels and, with mt-loss-mask, the loss mask): the position
    ids, i32 with the tokens' dimensions, named `position_ids` by the argument attribute
    `mt.input` (the plan's input name). The runtime computes them from the tokens it
    reads: each position counts from the token after the last end of document before it,
    the end of document keeping its own document's position (Megatron's
    `_get_ltor_masks_and_position_ids`). Every parameter `forward` reads that has the
    sequence dimension (a learned position table such as GPT's `wpe[seq, hidden]`) is read
    at the position ids instead of at the position of each token: its sequence dimension
    renamed `<seq>_position` (`mt.rename`: its rows are positions, which partitioning must
    not split as it splits the tokens' sequence, and the table keeps the weight decay
    mt-optimizer gave it), then `mt.gather` over it (whose gradient the scatter-add
    gives). Its readers must have the tokens' dimensions in their results (the table was
    broadcast over the batch). `mt.rope` over the sequence, in `forward` or in a layer
    (`mt.layer`, applied by `mt.repeat`, which passes the ids to every call as an
    invariant operand), rotates at the position ids. The sequence dimension is the one of
    the module's `mt.attention` ops.

    Under pipeline parallelism mt-pipeline-chunks hands the position ids, as every data
    argument, to the chunk functions reading them (those reading the table, and with rope
    or the document mask every chunk running layers).

    With the module attribute `mt.reset_attention_mask` (`mtc compile
    --reset-attention-mask`, Megatron's `--reset-attention-mask`), alone or with
    `mt.reset_position_ids`, `forward` takes the same position ids and every
    `mt.attention` (in `forward` or in a layer, reached as rope is) takes them as its
    document positions: a key is visible to the queries of its own document only.

    Without either attribute the module is left alone. Errors: a `forward` missing or not
    taking the tokens first; a model without `mt.attention`, or whose tokens lack its
    sequence dimension; positions read where the position ids do not reach: a position
    table read inside a layer, rope or attention in a function that is neither `forward`
    nor a layer applied by `mt.repeat`; with reset_position_ids, a model that reads no
    positions at all (the setting would do nothing); with reset_attention_mask, attention
    that is not causal or whose query lacks the tokens' dimensions. Ring attention's block
    steps (mtp-partition) and fused attention's block loops (mt-to-linalg) take the
    document positions as the decomposition does.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTLogitsPass : Pass<"mt-logits", "::mlir::ModuleOp"> {
  let summary = "Add a `logits` entry function: forward up to its loss, for generation";
  let description = [{
    Adds `@logits(tokens) -> logits`, the model's `forward` without its loss: a copy of
    `forward` without its labels argument (and its loss mask, mt-loss-mask, and position
    ids, mt-reset-documents: generation reads one document, at the positions of the tokens)
    that returns the logits operand of its `mt.cross_entropy` instead of the loss, with
    the result attribute `mt.buffer = "logits"` (the plan's buffer kind). The logits keep the batch and sequence
    dimensions of the tokens, in their order, followed by the class dimension (an
    `mt.transpose` puts them in that order where the model computed them otherwise); they
    are f32 (an `mt.cast` widens the logits of a bf16 or f16 model, which is what the
    loss reads too). What only the loss needed (the cross-entropy, an auxiliary
    loss) is erased. Where the position ids went, the positions 0, 1, ... go: a position
    table is read whole again; rope rotates at the index; attention within documents is
    plain causal attention; a layer stack's `mt.repeat` whose layer reads the ids only
    as rope's positions and attention's document positions calls the plain layer instead,
    `@<layer>.generate` (without the ids, `mt.layer_of` the layer; mt-kv-cache caches it),
    any other one gets the positions as its invariant operand.

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

def MTKVCachePass : Pass<"mt-kv-cache", "::mlir::ModuleOp"> {
  let summary = "Add `prefill` and `decode_step`: generation with a cache of keys and values";
  let description = [{
    Derives from `logits` (mt-logits) the two functions of cached generation, for one
    sequence (every dimension of the tokens but the sequence `seq` has size 1):

    - `@prefill(tokens[seq]) -> (logits, keys, values)`: `logits` on a whole window, which
      also returns, stacked over the layers, the keys and values its layer's attention took
      (after rope, one per kv head), their `seq` renamed `seq_cache`. Result attributes
      `mt.buffer = "logits" | "keys" | "values"`; the tokens argument `mt.buffer = "tokens"`.
    - `@decode_step(tokens[seq=1], position[seq=1] i32, keys, values) -> (logits, keys,
      values)`: `logits` on one new position. `position` is its absolute position p. A
      parameter with the `seq` dimension (a learned position table) is read at row p (an
      `mt.gather`); an `mt.rope` over positions `seq` rotates by p (rope over the window,
      row p selected by a 0/1 mask, which is exact); the layer's attention becomes, with
      existing ops, the new keys and values written into the cache at p, then the
      attention of the query over the cache with the positions after p masked (the
      algebra of mt-decompose's attention: scaled scores, the same large negative bias,
      softmax over `seq_cache`; grouped-query heads split per kv head). The stacked caches
      in, the written ones out (`mt.buffer = "keys" | "values"`). The layer function gets the
      position as a stacked operand (one copy per layer), the caches as stacked operands and
      results.

    The layer copies are `<layer>.prefill` and `<layer>.decode`, marked `mt.layer_of` the
    layer. An expert dispatch with a capacity factor sizes its capacity by the tokens of
    the derived function (one token in decode_step), as the verifier's formula does.

    The cache is f32 in every precision (the runtime's cache is f32): under mixed precision
    prefill widens the bf16/f16 keys and values it returns (exactly), and decode_step's
    attention casts the query and the new keys and values to f32, computes in f32 (as
    mt-decompose computes a low-precision attention) and casts its output back once. The
    positions are compared in f32 in every precision.

    A module over tensor parallelism (with or without sequence parallelism) or data
    parallelism up to ZeRO-2 (the distributed optimizer) gets them too: mtp-partition lays
    them out like `logits`, keeping each rank's part of the caches (see mtp-partition).

    Left alone (no function added; generation uses `logits`, the window path): a module
    without `logits` or with `prefill` / `decode_step` already; a module over pipeline,
    context or expert parallelism, under ZeRO-3 (which splits the micro-batch over dp) or
    with a searched strategy; a `logits` whose body is not one
    block with exactly one `mt.repeat` carrying all its operands and no attention or call of
    its own; a layer with nested repeats or calls, or not exactly one attention, or one that
    is not causal or saves its log-sum-exp.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

#endif // MTC_COMPILER_TRANSFORMS_PASSES_TD

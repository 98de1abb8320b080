//===- Passes.td - pipeline-parallel passes -----------------*- tablegen -*-===//

#ifndef MTC_COMPILER_PIPELINE_PASSES_TD
#define MTC_COMPILER_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Stage cut and chunk functions
//===----------------------------------------------------------------------===//

def MTPipelineChunksPass : Pass<"mt-pipeline-chunks", "::mlir::ModuleOp"> {
  let summary = "Cut the training step into per-chunk forward and backward functions";
  let description = [{
    With pipeline parallelism (`pp` x `virtual_stages` > 1 in `mt.parallel`) the layer
    stack is cut into model chunks (StageCut.h: equal layers per chunk, or the explicit
    `pipeline_layers`; chunk c runs on stage c % pp, V-shaped for zb-v). For every chunk
    c this pass adds two public functions, cut out of the outlined `@forward_backward`:

    - `@chunk<c>.forward`: chunk 0 takes the token ids, a later chunk the activation the
      previous chunk returned; the last chunk also takes the labels and returns the loss
      (each function takes the step's data arguments it reads: the loss mask of
      mt-loss-mask with the labels, the position ids of mt-reset-documents where the
      position table is read),
      the others return their output activation. After that come the residuals: every
      value the chunk's backward reads from its forward; then, for an MoE model, the
      tokens per expert of the chunk's layers (`mt.buffer = "expert_load"`, i64
      `[layers, experts]` with the chunk's `count` rows, one per `expert_load` result of
      `@forward_backward`, which mt-expert-load stacked over the whole layer stack).
    - `@chunk<c>.backward`: the gradient of the chunk's output (none for the last chunk,
      whose seed is the loss's), the residuals and the labels where the backward reads
      them -> the gradient of the chunk's input (none for chunk 0), then one gradient per
      parameter the chunk contributes to, named by `mt.grads` as on `@forward_backward`.
    - `@chunk<c>.backward_input` (B) and `@chunk<c>.backward_weight` (W), the backward in
      the two halves zero-bubble schedules run apart: B takes what the backward takes and
      returns the input gradient, then the *stash*: what W reads that B computes (the
      layers' stash of `@L.bwd.input`, stacked, then values of the loss's or the
      embedding's backward). W takes the stash, the residuals and parameters it reads and
      returns the parameter gradients. The layer stack is a repeat of `@L.bwd.input` in B
      and of `@L.bwd.weight` in W (mt-split-backward's parts, made here when missing).

    The layer stack of chunk c is an `mt.repeat` of `@L.fwd` / `@L.bwd` over its
    `count` layers, and a stacked layer parameter is an argument holding the chunk's
    slice of its `layers` dimension: the function attribute `mt.chunk_layers =
    [first, count]` records where the slice lies in the whole tensor (the runtime and
    checkpoints keep whole tensors), and the repeat carries `mt.first_instance = first`
    (the global layer index of its first call, which keys the dropout masks). The
    repeat's invariant operands (the position ids rope and the document mask read) stay
    invariant: every chunk function running layers takes them as the data input they are
    (W's repeat after its stash). A
    parameter the chunk does not read is not an argument; a model parameter read by
    chunks on different stages (tied embeddings: the embedding in chunk 0 and the head
    in the last chunk) is an argument of both, each returns its own part of the
    gradient, and the module attribute `mt.pipeline` lists it under `shared_params`
    with its chunks (the plan's `pipeline.shared_params` says the same, from the stage
    cut): the parts are to be summed over those stages (Megatron's embedding group), so
    both copies stay identical; the runtime does not run pipeline plans yet.

    Arguments and results carry `mt.param = @p` (parameters), `mt.grad = @p`
    (gradients) or `mt.buffer = "<kind>"` with kind input, activation, loss,
    activation_grad, residual or stash, for the plan's calling convention (an input, one of
    the step's data arguments, also carries `mt.input = "<name>"`, the plan's name of the
    step's argument: tokens, labels, loss_mask, position_ids); a residual or
    stash also carries `mt.index = k`, its position among the forward's residual results
    (the B's stash results), which is how each backward function picks its arguments. The module gets
    `mt.pipeline = {stages, virtual_stages, chunk_layers, chunk_stages, shared_params}`.

    Why after autodiff: `@forward_backward` already holds the whole program with its
    saved values chosen by the recompute policy, so cutting it around the layer stack's
    two repeats is a data-flow partition with nothing to re-derive, and every chunk
    function has exactly the ops, the VJPs and the recomputation of the single-stage step
    (cutting before autodiff would need autodiff to accept a seed gradient and an
    activation input and would differentiate each chunk separately). It runs after
    mt-outline-parameters, whose explicit parameter arguments are what gets sliced, and
    before partitioning, so each chunk function is partitioned (tp, sp) and compiled like
    `@forward_backward`. Without pipeline parallelism the pass does nothing.

    Not supported, each an error: a model parameter read inside a layer (its gradient
    sums over every chunk's layers), more than one layer stack, a value that crosses
    chunks other than the activation and its gradient, tokens per expert that the
    forward repeat does not stack.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

def MTPipelineOptimizerPass : Pass<"mt-pipeline-optimizer", "::mlir::ModuleOp"> {
  let summary = "Add each pipeline stage's gradient squares and optimizer step";
  let description = [{
    Under pipeline parallelism each stage holds only its parameters, and the global
    gradient norm (for clipping) needs the squares of every stage. For every stage s of
    a module with pipeline chunks (`mt.pipeline`, from mt-pipeline-chunks), this pass adds
    two public functions with the attributes `mt.pipeline_stage = s` and `mt.optimizer`
    (gradients and states take their optimizer layout in mtp-partition, as in
    `@optimizer_step`):

    - `@stage<s>.grad_squares(%grad_scale, %grads...) -> grad_squares`: the f32 sum over
      the gradients it takes of sum((g * grad_scale)^2), every element of the logical
      gradient counted once. It takes the gradient of every parameter the stage holds,
      except a `shared_params` parameter on a stage other than the stage of the lowest
      chunk listed for it (its gradient is summed over those stages before, so it is
      counted once).
    - `@stage<s>.optimizer_step(%step, %grad_scale, %grad_norm, %grads...,
      %params_and_states...) -> (lr, params_and_states...)`: `@optimizer_step`'s update
      of the stage's parameters (same learning rate, clip coefficient min(1, clip /
      (grad_norm + 1e-6)), AdamW or SGD, weight decay), with `%grad_norm` the global norm
      of the scaled gradients, sqrt of the sum over the stages of their grad_squares,
      given instead of computed. The gradients come one per parameter the stage holds,
      in `mt.param` order; the parameters and states as the outlined `@optimizer_step`
      takes and returns them (symbol order), those of the stage's parameters.

    Scalars carry `mt.buffer` = step, grad_scale, grad_norm, grad_squares or lr;
    gradients `mt.grad = @p`; parameters and states `mt.param` / `mt.state`.

    A stage holds the parameters its chunk functions take or return a gradient for, in
    *stage storage*: a layer parameter's leading `layers` dimension holds the layers of
    the stage's chunks, packed in increasing chunk order (interleaved pp 2 with 2 virtual
    stages and 4 layers: stage 0 holds chunks 0 and 2, layers 0 and 2, as `layers=2`); a
    model parameter is held whole by every stage that holds it (the tied embedding: the
    stages of the first and the last chunk, once when they are one stage as in zb-v).

    It runs after mt-pipeline-chunks (whose `mt.pipeline` and chunk functions say what
    each stage holds) and before partitioning. Without pipeline chunks the pass does
    nothing. A parameter no chunk reads is an error (no stage would update it).
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

def MTSGenerateSchedulePass : Pass<"mts-generate-schedule", "::mlir::ModuleOp"> {
  let summary = "Append a generated pipeline schedule (mts.schedule) to the module";
  let description = [{
    Generates the `mts.schedule` of one training step with `kind` (gpipe, 1f1b,
    interleaved, zb-h1, zb-v), `stages`, `virtual-stages` and `micro-batches` at the end of the
    module (see the mts dialect for the schedules). Parameters the kind cannot schedule
    are an error. The compiler calls `mtc::pipeline::buildSchedule` directly; the pass
    exists so that tests can look at every generator's output.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"1f1b\"",
           "Schedule: gpipe, 1f1b, interleaved, zb-h1 or zb-v">,
    Option<"stages", "stages", "int64_t", "1", "Pipeline stages (P)">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Model chunks per stage (V)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches of one step (m)">,
  ];
  let dependentDialects = ["::mtc::mts::MTSDialect"];
}

#endif // MTC_COMPILER_PIPELINE_PASSES_TD

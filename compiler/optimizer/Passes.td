//===- Passes.td - optimizer passes -------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_OPTIMIZER_PASSES_TD
#define MTC_COMPILER_OPTIMIZER_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTOptimizerPass : Pass<"mt-optimizer", "::mlir::ModuleOp"> {
  let summary = "Build the optimizer step from the module's train settings";
  let description = [{
    Adds `@optimizer_step(%step, %grad_scale, %grads...) -> (grad_norm, lr)`, where the
    gradients come in `mt.param` order (as `@forward_backward` returns them, summed over the
    micro-batches) and `%grad_scale` multiplies them first (1 / micro-batches, times the
    inverse loss scale). The step:

    1. clips the scaled gradients to the global norm `clip_grad` (every element counted
       once; the norm is returned whether or not it clips);
    2. computes the learning rate of step `%step` (0-based) from `lr`: `constant`, or a
       linear warm-up over `warmup` steps followed by `cosine` or `linear` decay to `min`
       at `decay_steps` (default: `train { steps }`);
    3. updates every parameter in place (`mt.assign`) with `adamw` (decoupled weight decay,
       bias-corrected moments in `mt.state` symbols `<param>.exp_avg` / `.exp_avg_sq`) or
       `sgd` (with momentum in `<param>.momentum_buffer`). Weight decay applies to the
       weights and embeddings, i.e. the parameters some `mt.contract` or `mt.gather` reads;
       norms' gains and biases are not decayed. Decayed parameters are marked
       `mt.weight_decay`.

    Layer parameters are updated as one stacked tensor (all their instances). Each
    gradient argument carries `mt.grad = @param` and the function `mt.optimizer`: it
    takes gradients and states in their optimizer layout (mtp-partition). The math is
    OptimizerUpdate.h's, which the pipeline stages' steps (mt-pipeline-optimizer) share.
    Defaults (no `optimizer` setting): PyTorch's AdamW, lr 1e-3, betas (0.9, 0.999),
    eps 1e-8, weight_decay 0.01. An optimizer or schedule `kind` other than those above
    is an error (never replaced by a default).
  }];
  let dependentDialects = ["::mtc::mt::MTDialect", "::mlir::func::FuncDialect"];
}

#endif // MTC_COMPILER_OPTIMIZER_PASSES_TD

// RUN: mt-opt %s -split-input-file -verify-diagnostics --mtc-training-pipeline --mt-decompose --mt-outline-parameters --mt-pipeline-chunks --mt-pipeline-optimizer | FileCheck %s

// Tests that pp 2 gives each stage its two layers and its model parameters: the tied
// embedding on both stages (shared), counted by grad_squares on stage 0 only (the stage of
// its lowest chunk); the final norm on stage 1. grad_squares sums the scaled gradients'
// squares; the stage step clips with the given grad_norm: min(1, clip / (norm + 1e-6)).
// CHECK-LABEL: module @even
// CHECK: func.func @stage0.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: %[[SCALED:.*]] = mt.mul %arg1, %arg0
// CHECK: mt.mul %[[SCALED]], %[[SCALED]]
// CHECK: mt.reduce_sum
// CHECK: return %{{.*}} : !mt.tensor<[], f32>
// CHECK: func.func @stage0.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %[[NORM:[^:]*]]: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: mt.add %[[NORM]], %{{.*}} : <[], f32>, <[], f32> -> <[], f32>
// CHECK: mt.div
// CHECK: return
// CHECK: func.func @stage1.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
// CHECK: func.func @stage1.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
module @even attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), clip_grad = 1.0, precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that interleaved stages (pp 2, 2 virtual stages, 4 layers) hold their chunks'
// layers packed: stage 0 chunks 0 and 2, stage 1 chunks 1 and 3, each as layers=2.
// CHECK-LABEL: module @interleaved
// CHECK-SAME: chunk_stages = array<i64: 0, 1, 0, 1>
// CHECK: func.func @stage0.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage0.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage1.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
// CHECK: func.func @stage1.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
module @interleaved attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2, schedule = "interleaved", virtual_stages = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that zb-v puts the first and the last chunk on stage 0: the tied embedding is
// held (and counted) once there, not shared, and stage 1 holds only layers.
// CHECK-LABEL: module @zbv
// CHECK-SAME: chunk_stages = array<i64: 0, 1, 1, 0>, shared_params = {}
// CHECK: func.func @stage0.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage0.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage1.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
// CHECK: func.func @stage1.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=2, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
module @zbv attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2, schedule = "zb-v">, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that an uneven cut (3 + 1 layers) sizes each stage's layer parameters by its chunks.
// CHECK-LABEL: module @uneven
// CHECK: func.func @stage0.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage0.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[layers=3, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=3, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=3, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=3, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=3, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 0 : i64}
// CHECK: func.func @stage1.grad_squares(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.grad = @block.w2})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
// CHECK: func.func @stage1.optimizer_step(%{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "step"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_scale"}, %{{[^:]*}}: !mt.tensor<[], f32> {mt.buffer = "grad_norm"}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.grad = @lnf.g}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4], f32> {mt.grad = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.grad = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.grad = @block.w2}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, %{{[^:]*}}: !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4], f32> {mt.param = @block.g}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4], f32> {mt.state = @block.g.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.param = @block.w1}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, %{{[^:]*}}: !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.param = @block.w2}, %{{[^:]*}}: !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, %{{[^:]*}}: !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "lr"}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg}, !mt.tensor<[vocab=8, hidden=4], f32> {mt.state = @wte.exp_avg_sq}, !mt.tensor<[hidden=4], f32> {mt.param = @lnf.g}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg}, !mt.tensor<[hidden=4], f32> {mt.state = @lnf.g.exp_avg_sq}, !mt.tensor<[layers=1, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=1, hidden=4], f32> {mt.state = @block.g.exp_avg}, !mt.tensor<[layers=1, hidden=4], f32> {mt.state = @block.g.exp_avg_sq}, !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.param = @block.w1}, !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg}, !mt.tensor<[layers=1, hidden=4, ffn=4], f32> {mt.state = @block.w1.exp_avg_sq}, !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.param = @block.w2}, !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg}, !mt.tensor<[layers=1, ffn=4, hidden=4], f32> {mt.state = @block.w2.exp_avg_sq}) attributes {mt.optimizer, mt.pipeline_stage = 1 : i64}
module @uneven attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2, pipeline_layers = [3, 1]>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that without pipeline parallelism the pass adds nothing.
// CHECK-LABEL: module @nopipeline
// CHECK-NOT: @stage0
module @nopipeline attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// RUN: mt-opt %s -split-input-file -mt-optimizer | FileCheck %s

// Tests that AdamW gets two zero-initialised states per parameter (stacked for a layer
// parameter), clips to the global norm, decays the contracted weight but not the bias or
// the gain, and writes every parameter and state back. The step names its gradients
// (mt.grad) and is marked mt.optimizer (partitioned in the optimizer layout).
module @adamw attributes {mt.train = #mt.train<optimizer = adamw(lr = 1.0e-3, betas = (0.9, 0.95), weight_decay = 0.1), clip_grad = 1.0>} {
  mt.param @w : !mt.tensor<[hidden=8, ffn=16], f32> init normal(2.000000e-02)
  mt.param @b : !mt.tensor<[ffn=16], f32> init zeros
  mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=8], f32>
    %y = mt.mul %x, %g : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
    return %y : !mt.tensor<[hidden=8], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[hidden=8, ffn=16], f32>
    %b = mt.param_ref @b : !mt.tensor<[ffn=16], f32>
    %y = mt.repeat @block(%x) count 3 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
    %h = mt.contract %y, %w over [hidden] : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[ffn=16], f32>
    %o = mt.add %h, %b : !mt.tensor<[ffn=16], f32>, !mt.tensor<[ffn=16], f32> -> !mt.tensor<[ffn=16], f32>
    %l = mt.reduce_sum %o over [ffn] : !mt.tensor<[ffn=16], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @adamw
// Only the contracted parameter is marked for weight decay.
// CHECK: mt.param @w : {{.*}} {mt.weight_decay}
// CHECK-NEXT: mt.state @w.exp_avg of @w : !mt.tensor<[hidden=8, ffn=16], f32>
// CHECK-NEXT: mt.state @w.exp_avg_sq of @w : !mt.tensor<[hidden=8, ffn=16], f32>
// CHECK-NEXT: mt.param @b : {{.*}} init zeros{{$}}
// CHECK: mt.state @block.g.exp_avg of @block.g : !mt.tensor<[layers=3, hidden=8], f32>
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: %[[STEP:[^:]*]]: !mt.tensor<[], f32>, %[[SCALE:[^:]*]]: !mt.tensor<[], f32>, %[[GW:[^:]*]]: !mt.tensor<[hidden=8, ffn=16], f32> {mt.grad = @w}, %{{[^:]*}}: !mt.tensor<[ffn=16], f32> {mt.grad = @b}, %{{[^:]*}}: !mt.tensor<[layers=3, hidden=8], f32> {mt.grad = @block.g})
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "grad_norm"}, !mt.tensor<[], f32> {mt.buffer = "lr"})
// CHECK-SAME: mt.grads = [@w, @b, @block.g], mt.optimizer
// CHECK: mt.mul %[[GW]], %[[SCALE]]
// CHECK: %[[NORM:.*]] = mt.sqrt
// CHECK: mt.constant 1.000000e+00
// CHECK: %[[P:.*]] = mt.param_ref @w : <[hidden=8, ffn=16], f32>
// CHECK: mt.param_ref @w.exp_avg
// Decoupled weight decay on the matrix:
// CHECK: mt.constant 1.000000e-01
// CHECK: mt.mul %{{.*}}, %[[P]]
// CHECK: mt.assign @w.exp_avg
// CHECK: mt.assign @w.exp_avg_sq
// CHECK: mt.assign @w, %{{.*}} : <[hidden=8, ffn=16], f32>
// CHECK: mt.param_ref @b :
// CHECK-NOT: mt.constant 1.000000e-01
// CHECK: mt.assign @b,
// CHECK: mt.param_ref @block.g : <[layers=3, hidden=8], f32>
// CHECK: mt.assign @block.g, %{{.*}} : <[layers=3, hidden=8], f32>
// CHECK: return %[[NORM]], %{{.*}} : !mt.tensor<[], f32>, !mt.tensor<[], f32>

// -----

// Tests SGD with momentum and a cosine schedule with warm-up: one state per parameter,
// and the schedule's cosine and warm-up mask.
module @sgd attributes {mt.train = #mt.train<optimizer = sgd(lr = 1.0e-1, momentum = 0.9), lr = cosine(warmup = 10, min = 1.0e-2), steps = 100>} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[hidden=8], f32>
    %y = mt.mul %x, %w : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
    %l = mt.reduce_sum %y over [hidden] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @sgd
// CHECK: mt.state @w.momentum_buffer of @w
// CHECK-NOT: mt.state
// CHECK-LABEL: func.func @optimizer_step(
// CHECK: mt.cos
// CHECK: mt.greater
// CHECK: mt.param_ref @w.momentum_buffer
// CHECK: mt.assign @w.momentum_buffer
// CHECK: mt.assign @w,

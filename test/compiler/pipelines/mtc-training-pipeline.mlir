// Tests that the training pipeline runs autodiff then the optimizer pass, passing the
// recompute policy through.
// RUN: mt-opt %s -mtc-training-pipeline | FileCheck %s
// RUN: mt-opt %s -mtc-training-pipeline=recompute=full | FileCheck %s --check-prefix=FULL

module attributes {mt.train = #mt.train<optimizer = sgd(lr = 1.0e-1)>} {
  mt.param @block.w layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=4, ffn=4], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4, ffn=4], f32> -> !mt.tensor<[ffn=4], f32>
    %t = mt.tanh %h : !mt.tensor<[ffn=4], f32>
    %y = mt.rename %t ffn to hidden : !mt.tensor<[ffn=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    %l = mt.reduce_sum %y over [hidden] : !mt.tensor<[hidden=4], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK: func.func @block.fwd(%{{[^)]*}}) -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32>, !mt.tensor<[ffn=4], f32>)
// CHECK: func.func @forward_backward(
// CHECK: func.func @optimizer_step(
// CHECK: mt.assign @block.w
// FULL: func.func @block.fwd(%{{[^)]*}}) -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32>)
// FULL: func.func @optimizer_step(

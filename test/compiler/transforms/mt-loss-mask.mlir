// RUN: mt-opt %s -split-input-file -verify-diagnostics -mt-loss-mask | FileCheck %s

// Tests that eod_mask_loss gives forward a third argument, the f32 loss mask with the
// labels' dims, which the cross-entropy of the labels takes as its mask.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[T:.*]]: !mt.tensor<[batch=2, seq=3], i32>, %[[L:.*]]: !mt.tensor<[batch=2, seq=3], i32>, %[[M:.*]]: !mt.tensor<[batch=2, seq=3], f32>)
// CHECK: mt.cross_entropy %{{.*}}, %[[L]] mask %[[M]] over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32>, !mt.tensor<[batch=2, seq=3], f32> -> <[], f32>
module attributes {mt.train = #mt.train<eod_mask_loss = true>} {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %x, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that without the setting (off, or no train settings) the module is left alone.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=2, seq=3, vocab=5], f32>) -> !mt.tensor<[], f32>
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
module attributes {mt.train = #mt.train<eod_mask_loss = false>} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>, %l: !mt.tensor<[batch=2, seq=3, vocab=5], f32>) -> !mt.tensor<[], f32> {
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that pipeline parallelism takes the mask as one stage does (mt-pipeline-chunks gives
// it to the chunk computing the loss).
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=2, seq=3], i32>, %[[L:.*]]: !mt.tensor<[batch=2, seq=3], i32>, %[[M:.*]]: !mt.tensor<[batch=2, seq=3], f32>)
// CHECK: mt.cross_entropy %{{.*}}, %[[L]] mask %[[M]] over vocab
module attributes {mt.train = #mt.train<eod_mask_loss = true>, mt.parallel = #mt.parallel<pp = 2>} {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %x, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a forward whose labels feed no cross-entropy is refused.
module attributes {mt.train = #mt.train<eod_mask_loss = true>} {
  // expected-error @below {{eod_mask_loss masks the cross_entropy of the labels, but 'forward' computes none}}
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>, %y: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[], f32> {
    %loss = mt.reduce_sum %x over [hidden] : <[hidden=4], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a forward taking more than the tokens and the labels is refused.
module attributes {mt.train = #mt.train<eod_mask_loss = true>} {
  // expected-error @below {{eod_mask_loss needs 'forward' to take the tokens and the labels only, but it takes 3 arguments}}
  func.func @forward(%tokens: !mt.tensor<[seq=3], i32>, %labels: !mt.tensor<[seq=3], i32>, %m: !mt.tensor<[seq=3], f32>) -> !mt.tensor<[], f32> {
    %loss = mt.reduce_sum %m over [seq] : <[seq=3], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

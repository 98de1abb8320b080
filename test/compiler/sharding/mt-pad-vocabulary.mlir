// RUN: mt-opt %s -split-input-file -mt-pad-vocabulary -verify-diagnostics | FileCheck %s

// Tests that a vocabulary tp does not divide (33 over tp 2) is padded to 34 in every type
// (parameters, signatures, every op), that the loss sees the padded classes masked (a large
// negative added at the positions >= 33, 0 elsewhere), and that the module records the
// padded size in mt.dims and the real one in mt.vocabulary.
module @tied attributes {mt.dims = {hidden = 8 : i64, vocab = 33 : i64}, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @w : !mt.tensor<[vocab=33, hidden=8], f32> init normal(2.000000e-02)
  func.func @forward(%t: !mt.tensor<[batch=2, seq=4], i32>, %l: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[vocab=33, hidden=8], f32>
    %x = mt.gather %w, %t over vocab : !mt.tensor<[vocab=33, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %y = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[vocab=33, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, vocab=33], f32>
    %c = mt.cross_entropy %y, %l over vocab : !mt.tensor<[batch=2, seq=4, vocab=33], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @tied
// CHECK-SAME: mt.dims = {hidden = 8 : i64, vocab = 34 : i64}
// CHECK-SAME: mt.vocabulary = {dim = "vocab", size = 33 : i64}
// CHECK: mt.param @w : !mt.tensor<[vocab=34, hidden=8], f32>
// CHECK: %[[W:.*]] = mt.param_ref @w : <[vocab=34, hidden=8], f32>
// CHECK: mt.gather %[[W]], %{{.*}} over vocab : <[vocab=34, hidden=8], f32>
// CHECK: %[[Y:.*]] = mt.contract {{.*}} -> <[batch=2, seq=4, vocab=34], f32>
// CHECK: %[[POS:.*]] = mt.iota dim vocab : <[vocab=34], f32>
// CHECK: %[[REAL:.*]] = mt.constant 3.250000e+01 : <[], f32>
// CHECK: %[[PADDED:.*]] = mt.greater %[[POS]], %[[REAL]]
// CHECK: %[[PENALTY:.*]] = mt.constant -1.7014117{{[0-9]*}}E+38 : <[], f32>
// CHECK: %[[MASK:.*]] = mt.mul %[[PADDED]], %[[PENALTY]]
// CHECK: %[[MASKED:.*]] = mt.add %[[Y]], %[[MASK]] : <[batch=2, seq=4, vocab=34], f32>, <[vocab=34], f32> -> <[batch=2, seq=4, vocab=34], f32>
// CHECK: mt.cross_entropy %[[MASKED]], %{{.*}} over vocab : <[batch=2, seq=4, vocab=34], f32>

// -----

// Tests that a vocabulary tp divides is left as it is: no padding, no mask.
module @divides attributes {mt.dims = {hidden = 8 : i64, vocab = 32 : i64}, mt.parallel = #mt.parallel<tp = 4>} {
  mt.param @w : !mt.tensor<[vocab=32, hidden=8], f32> init normal(2.000000e-02)
  func.func @forward(%t: !mt.tensor<[batch=2, seq=4], i32>, %l: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[vocab=32, hidden=8], f32>
    %x = mt.gather %w, %t over vocab : !mt.tensor<[vocab=32, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %y = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[vocab=32, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, vocab=32], f32>
    %c = mt.cross_entropy %y, %l over vocab : !mt.tensor<[batch=2, seq=4, vocab=32], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @divides
// CHECK-NOT: mt.vocabulary
// CHECK: mt.param @w : !mt.tensor<[vocab=32, hidden=8], f32>
// CHECK-NOT: mt.iota
// CHECK: mt.cross_entropy

// -----

// Tests that a layout which does not split the vocabulary over tp (here only `hidden`)
// leaves it unpadded, whatever tp does not divide.
module @unsplit attributes {mt.dims = {hidden = 8 : i64, tok = 33 : i64}, mt.parallel = #mt.parallel<tp = 2, layout = {hidden: tp}>} {
  mt.param @w : !mt.tensor<[tok=33, hidden=8], f32> init normal(2.000000e-02)
  func.func @forward(%t: !mt.tensor<[batch=2, seq=4], i32>, %l: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[tok=33, hidden=8], f32>
    %x = mt.gather %w, %t over tok : !mt.tensor<[tok=33, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %y = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[tok=33, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, tok=33], f32>
    %c = mt.cross_entropy %y, %l over tok : !mt.tensor<[batch=2, seq=4, tok=33], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @unsplit
// CHECK-NOT: mt.vocabulary
// CHECK: mt.param @w : !mt.tensor<[tok=33, hidden=8], f32>
// CHECK-NOT: mt.iota
// CHECK: mt.cross_entropy

// -----

// Tests that a vocabulary with another name, mapped to tp by the layout, is padded where it
// trails a parameter (an untied output projection, [hidden, tok]) and in a layer function's
// types too, and that a bf16 loss gets its mask cast to bf16 with a penalty bf16 holds.
module @untied attributes {mt.dims = {hidden = 8 : i64, tok = 5 : i64}, mt.parallel = #mt.parallel<tp = 4, layout = {tok: tp}>} {
  mt.param @emb : !mt.tensor<[tok=5, hidden=8], bf16> init normal(2.000000e-02)
  mt.param @head : !mt.tensor<[hidden=8, tok=5], bf16> init normal(2.000000e-02)
  func.func @scale(%h: !mt.tensor<[batch=2, seq=4, tok=5], bf16>) -> !mt.tensor<[batch=2, seq=4, tok=5], bf16> attributes {mt.layer} {
    %r = mt.neg %h : !mt.tensor<[batch=2, seq=4, tok=5], bf16>
    return %r : !mt.tensor<[batch=2, seq=4, tok=5], bf16>
  }
  func.func @forward(%t: !mt.tensor<[batch=2, seq=4], i32>, %l: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[tok=5, hidden=8], bf16>
    %w = mt.param_ref @head : !mt.tensor<[hidden=8, tok=5], bf16>
    %x = mt.gather %e, %t over tok : !mt.tensor<[tok=5, hidden=8], bf16>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], bf16>
    %y = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], bf16>, !mt.tensor<[hidden=8, tok=5], bf16> -> !mt.tensor<[batch=2, seq=4, tok=5], bf16>
    %z = func.call @scale(%y) : (!mt.tensor<[batch=2, seq=4, tok=5], bf16>) -> !mt.tensor<[batch=2, seq=4, tok=5], bf16>
    %c = mt.cross_entropy %z, %l over tok : !mt.tensor<[batch=2, seq=4, tok=5], bf16>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @untied
// CHECK-SAME: mt.dims = {hidden = 8 : i64, tok = 8 : i64}
// CHECK-SAME: mt.vocabulary = {dim = "tok", size = 5 : i64}
// CHECK: mt.param @emb : !mt.tensor<[tok=8, hidden=8], bf16>
// CHECK: mt.param @head : !mt.tensor<[hidden=8, tok=8], bf16>
// CHECK: func.func @scale(%{{.*}}: !mt.tensor<[batch=2, seq=4, tok=8], bf16>) -> !mt.tensor<[batch=2, seq=4, tok=8], bf16>
// CHECK: mt.neg %{{.*}} : <[batch=2, seq=4, tok=8], bf16>
// CHECK: %[[POS:.*]] = mt.iota dim tok : <[tok=8], f32>
// CHECK: %[[REAL:.*]] = mt.constant 4.500000e+00 : <[], f32>
// CHECK: %[[PADDED:.*]] = mt.greater %[[POS]], %[[REAL]]
// CHECK: %[[CAST:.*]] = mt.cast %[[PADDED]] : <[tok=8], f32> to <[tok=8], bf16>
// CHECK: %[[PENALTY:.*]] = mt.constant -1.69{{[0-9]*}}E+38 : <[], bf16>
// CHECK: %[[MASK:.*]] = mt.mul %[[CAST]], %[[PENALTY]]
// CHECK: %[[MASKED:.*]] = mt.add %{{.*}}, %[[MASK]]
// CHECK: mt.cross_entropy %[[MASKED]], %{{.*}} over tok : <[batch=2, seq=4, tok=8], bf16>

// -----

// Tests that a vocabulary too large for exact f32 positions (the mask's) is an error.
module @huge attributes {mt.parallel = #mt.parallel<tp = 2>} {
  func.func @forward(%y: !mt.tensor<[seq=1, vocab=16777217], f32>, %l: !mt.tensor<[seq=1], i32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{cannot mask a vocabulary of 16777218 classes: its positions are not exact in f32 (at most 2^24)}}
    %c = mt.cross_entropy %y, %l over vocab : !mt.tensor<[seq=1, vocab=16777217], f32>, !mt.tensor<[seq=1], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

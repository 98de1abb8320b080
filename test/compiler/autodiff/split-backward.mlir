// RUN: mt-opt %s -split-input-file -mt-autodiff -mt-split-backward | FileCheck %s

// Tests the B/W split of a two-projection layer: B computes the input gradient through
// both projections and stashes the incoming gradient (W reads it) and the two output
// gradients; W computes the three parameter gradients from the saved activations and the
// stash, without the incoming gradient as an argument. The whole backward stays.
module @layered {
  mt.param @s : !mt.tensor<[hidden=8], f32> init ones
  mt.param @block.w layer @block : !mt.tensor<[hidden=8, ffn=16], f32> init normal(2.000000e-02)
  mt.param @block.v layer @block : !mt.tensor<[ffn=16, hidden=8], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=8, ffn=16], f32>
    %v = mt.param_ref @block.v : !mt.tensor<[ffn=16, hidden=8], f32>
    %s = mt.param_ref @s : !mt.tensor<[hidden=8], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[batch=2, ffn=16], f32>
    %g = mt.tanh %h : !mt.tensor<[batch=2, ffn=16], f32>
    %o = mt.contract %g, %v over [ffn] : !mt.tensor<[batch=2, ffn=16], f32>, !mt.tensor<[ffn=16, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
    %y = mt.mul %o, %s : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
    return %y : !mt.tensor<[batch=2, hidden=8], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 3 : (!mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32>
    %l = mt.reduce_sum %y over [batch, hidden] : !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: func.func @block.bwd(
// CHECK-SAME: mt.param_grads = [@block.w, @block.v, @s]

// B: dy * s, back through v, tanh' and w to dx; returns dx and the stash (dy, dy * s, and
// the gradient before w).
// CHECK-LABEL: func.func @block.bwd.input(
// CHECK-SAME: %[[DY:[a-z0-9]+]]: !mt.tensor<[batch=2, hidden=8], f32>,
// CHECK-SAME: -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, ffn=16], f32>)
// CHECK-SAME: attributes {mt.backward_part = "input", mt.layer_of = @block}
// CHECK: %[[DO:.*]] = mt.mul %[[DY]], %{{.*}}
// CHECK: %[[DG:.*]] = mt.contract %[[DO]], %{{.*}} over [hidden]
// CHECK: %[[DH:.*]] = mt.mul %[[DG]], %{{.*}}
// CHECK: %[[DX:.*]] = mt.contract %[[DH]], %{{.*}} over [ffn]
// CHECK-NOT: over [batch]
// CHECK: return %[[DX]], %[[DY]], %[[DO]], %[[DH]]

// W: the weight gradients contract over the batch; ds reduces dy * o.
// CHECK-LABEL: func.func @block.bwd.weight(
// CHECK-SAME: %{{[a-z0-9]+}}: !mt.tensor<[batch=2, hidden=8], f32>, %{{[a-z0-9]+}}: !mt.tensor<[batch=2, ffn=16], f32>, %{{[a-z0-9]+}}: !mt.tensor<[batch=2, hidden=8], f32>,
// CHECK-SAME: %[[WDY:[a-z0-9]+]]: !mt.tensor<[batch=2, hidden=8], f32>, %[[STASHDO:[a-z0-9]+]]: !mt.tensor<[batch=2, hidden=8], f32>, %[[STASHDH:[a-z0-9]+]]: !mt.tensor<[batch=2, ffn=16], f32>)
// CHECK-SAME: attributes {mt.backward_part = "weight", mt.layer_of = @block, mt.param_grads = [@block.w, @block.v, @s]}
// CHECK-NOT: mt.param_ref
// CHECK: %[[PROD:.*]] = mt.mul %[[WDY]], %{{.*}}
// CHECK: %[[DS:.*]] = mt.reduce_sum %[[PROD]] over [batch]
// CHECK: mt.contract %[[STASHDO]], %{{.*}} over [batch]
// CHECK: mt.contract %[[STASHDH]], %{{.*}} over [batch]
// CHECK: return %{{.*}}, %{{.*}}, %[[DS]]

// -----

// Tests that a layer whose repeat passes an invariant operand (rope's position ids) keeps
// it last in W, after the stash (a repeat passes its invariant operands last), as B and
// the whole backward keep it last.
// CHECK-LABEL: module @invariant
// CHECK: func.func @block.bwd.input(%{{.*}}: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %{{.*}}: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %{{.*}}: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4, ffn=8], f32>)
// CHECK: func.func @block.bwd.weight(%{{.*}}: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %[[STASH:[a-z0-9]+]]: !mt.tensor<[batch=2, seq=4, ffn=8], f32>, %{{.*}}: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.contract {{.*}}%[[STASH]]
module @invariant {
  mt.param @block.w layer @block : !mt.tensor<[hidden=8, ffn=8], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=8], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=8, ffn=8], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=8], f32> -> !mt.tensor<[batch=2, seq=4, ffn=8], f32>
    %r = mt.rope %h over ffn position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, ffn=8], f32>
    %y = mt.rename %r ffn to hidden : !mt.tensor<[batch=2, seq=4, ffn=8], f32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    return %y : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x, %ids) count 2 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %l = mt.reduce_sum %y over [batch, seq, hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// RUN: mt-opt %s -split-input-file -mt-outline-parameters -verify-diagnostics | FileCheck %s
// RUN: not mt-opt %s -split-input-file -mt-outline-parameters -mt-outline-parameters 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TWICE

// A second run fails on a module the first one outlined, with one error at the module (not
// followed by a dump of the whole module).
// TWICE: mt-outline-parameters.mlir:[[@LINE+8]]:1: error: module is already outlined ('mt.outlined'): its functions take parameters and states as arguments
// TWICE-NEXT: module @model_params {
// TWICE-NEXT: ^
// TWICE-NEXT: error: module is already outlined

// Tests that the model parameters a function reads become arguments appended after its own,
// in module symbol order (not read order), marked with mt.param; that the module is marked
// outlined and keeps its mt.param ops; and that a function reading nothing is unchanged.
module @model_params {
  mt.param @w : !mt.tensor<[hidden=4, ffn=8], f32> init normal(2.000000e-02)
  mt.param @unused : !mt.tensor<[hidden=4], f32> init zeros
  mt.param @b : !mt.tensor<[ffn=8], f32> init zeros
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[], f32> {
    %b = mt.param_ref @b : !mt.tensor<[ffn=8], f32>
    %w = mt.param_ref @w : !mt.tensor<[hidden=4, ffn=8], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4, ffn=8], f32> -> !mt.tensor<[ffn=8], f32>
    %o = mt.add %h, %b : !mt.tensor<[ffn=8], f32>, !mt.tensor<[ffn=8], f32> -> !mt.tensor<[ffn=8], f32>
    %l = mt.reduce_sum %o over [ffn] : !mt.tensor<[ffn=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
  func.func @pure(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    return %x : !mt.tensor<[hidden=4], f32>
  }
}
// CHECK-LABEL: module @model_params attributes {mt.outlined}
// CHECK: mt.param @w
// CHECK: mt.param @unused
// CHECK: mt.param @b
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[hidden=4], f32>,
// CHECK-SAME: %[[W:[^:]*]]: !mt.tensor<[hidden=4, ffn=8], f32> {mt.param = @w},
// CHECK-SAME: %[[B:[^:]*]]: !mt.tensor<[ffn=8], f32> {mt.param = @b})
// CHECK-SAME: -> !mt.tensor<[], f32>
// CHECK-NOT: mt.param_ref
// CHECK: %[[H:.*]] = mt.contract %[[X]], %[[W]] over [hidden]
// CHECK: mt.add %[[H]], %[[B]]
// CHECK-LABEL: func.func @pure(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {

// -----

// Tests that layer parameters read through mt.repeat become arguments of the layer function
// (instance type) and of its caller (stacked along `layers`), passed as stacked operands
// after the existing ones; that a repeat without `carried` (all operands carried) gets
// `carried` set to its old operand count; and that a repeat with stacked operands of its own
// keeps them first.
module @layer_params {
  mt.param @block.w layer @block : !mt.tensor<[hidden=4, hidden_out=4], f32> init normal(2.000000e-02)
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=4], f32>
    %y = mt.mul %x, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @block.scaled(%x: !mt.tensor<[hidden=4], f32>, %s: !mt.tensor<[], f32>) -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32>) attributes {mt.layer_of = @block} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=4, hidden_out=4], f32>
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=4], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4, hidden_out=4], f32> -> !mt.tensor<[hidden_out=4], f32>
    %r = mt.rename %h hidden_out to hidden : !mt.tensor<[hidden_out=4], f32> -> !mt.tensor<[hidden=4], f32>
    %y = mt.mul %r, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    %z = mt.mul %y, %s : !mt.tensor<[hidden=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[hidden=4], f32>
    return %z, %y : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>, %s: !mt.tensor<[layers=3], f32>) -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[layers=3, hidden=4], f32>) {
    %y = mt.repeat @block(%x) count 3 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    %z:2 = mt.repeat @block.scaled(%y, %s) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=4], f32>, !mt.tensor<[layers=3], f32>) -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[layers=3, hidden=4], f32>)
    return %z#0, %z#1 : !mt.tensor<[hidden=4], f32>, !mt.tensor<[layers=3, hidden=4], f32>
  }
}
// CHECK-LABEL: module @layer_params attributes {mt.outlined}
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32>,
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @block.g})
// CHECK-SAME: attributes {mt.layer}
// CHECK-LABEL: func.func @block.scaled(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32>, %{{[^:]*}}: !mt.tensor<[], f32>,
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4, hidden_out=4], f32> {mt.param = @block.w},
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @block.g})
// CHECK-SAME: attributes {mt.layer_of = @block}
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[hidden=4], f32>, %[[S:[^:]*]]: !mt.tensor<[layers=3], f32>,
// CHECK-SAME: %[[W:[^:]*]]: !mt.tensor<[layers=3, hidden=4, hidden_out=4], f32> {mt.param = @block.w},
// CHECK-SAME: %[[G:[^:]*]]: !mt.tensor<[layers=3, hidden=4], f32> {mt.param = @block.g})
// CHECK: %[[Y:.*]] = mt.repeat @block(%[[X]], %[[G]]) count 3 {carried = 1 : i64}
// CHECK-SAME: (!mt.tensor<[hidden=4], f32>, !mt.tensor<[layers=3, hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
// CHECK: mt.repeat @block.scaled(%[[Y]], %[[S]], %[[W]], %[[G]]) count 3 {carried = 1 : i64}

// -----

// Tests that a model parameter read inside a layer, which every instance shares, is
// broadcast by the caller to a stacked operand (one broadcast shared by the repeats that
// pass it), and that the repeat's stacking dimension and count are used.
module @model_param_in_layer {
  mt.param @s : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=4], f32>
    %s = mt.param_ref @s : !mt.tensor<[hidden=4], f32>
    %y = mt.mul %x, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    %z = mt.add %y, %s : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %z : !mt.tensor<[hidden=4], f32>
  }
  func.func @block.again(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer_of = @block} {
    %s = mt.param_ref @s : !mt.tensor<[hidden=4], f32>
    %z = mt.add %x, %s : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %z : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    %z = mt.repeat @block.again(%y) count 2 {reverse} : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %z : !mt.tensor<[hidden=4], f32>
  }
}
// CHECK-LABEL: module @model_param_in_layer
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32>,
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @s},
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @block.g})
// CHECK-LABEL: func.func @block.again(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[hidden=4], f32> {mt.param = @s})
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[hidden=4], f32>,
// CHECK-SAME: %[[S:[^:]*]]: !mt.tensor<[hidden=4], f32> {mt.param = @s},
// CHECK-SAME: %[[G:[^:]*]]: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g})
// CHECK: %[[SS:.*]] = mt.broadcast %[[S]] : <[hidden=4], f32> to <[layers=2, hidden=4], f32>
// CHECK: %[[Y:.*]] = mt.repeat @block(%[[X]], %[[SS]], %[[G]]) count 2 {carried = 1 : i64}
// CHECK-NOT: mt.broadcast
// CHECK: mt.repeat @block.again(%[[Y]], %[[SS]]) count 2 {carried = 1 : i64, reverse}

// -----

// Tests that assigned parameters and states become results appended after the function's
// own, in symbol order, marked mt.param / mt.state; that a read after an assign uses the
// assigned value (no argument for a symbol only read after its assign); that a symbol both
// read and written is an argument and a result; and that the assigns are gone.
module @assign {
  mt.param @w : !mt.tensor<[hidden=4], f32> init zeros
  mt.state @w.m of @w : !mt.tensor<[hidden=4], f32>
  mt.param @v : !mt.tensor<[hidden=4], f32> init zeros
  func.func @step(%g: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %m = mt.param_ref @w.m : !mt.tensor<[hidden=4], f32>
    %m1 = mt.add %m, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    mt.assign @v, %g : !mt.tensor<[hidden=4], f32>
    mt.assign @w.m, %m1 : !mt.tensor<[hidden=4], f32>
    %w = mt.param_ref @w : !mt.tensor<[hidden=4], f32>
    %m2 = mt.param_ref @w.m : !mt.tensor<[hidden=4], f32>
    %w1 = mt.sub %w, %m2 : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    mt.assign @w, %w1 : !mt.tensor<[hidden=4], f32>
    %v = mt.param_ref @v : !mt.tensor<[hidden=4], f32>
    return %v : !mt.tensor<[hidden=4], f32>
  }
}
// CHECK-LABEL: module @assign
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[G:[^:]*]]: !mt.tensor<[hidden=4], f32>,
// CHECK-SAME: %[[W:[^:]*]]: !mt.tensor<[hidden=4], f32> {mt.param = @w},
// CHECK-SAME: %[[M:[^:]*]]: !mt.tensor<[hidden=4], f32> {mt.state = @w.m})
// CHECK-SAME: -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> {mt.param = @w},
// CHECK-SAME: !mt.tensor<[hidden=4], f32> {mt.state = @w.m}, !mt.tensor<[hidden=4], f32> {mt.param = @v})
// CHECK-NOT: mt.param_ref
// CHECK-NOT: mt.assign
// CHECK: %[[M1:.*]] = mt.add %[[M]], %[[G]]
// CHECK: %[[W1:.*]] = mt.sub %[[W]], %[[M1]]
// CHECK: return %[[G]], %[[W1]], %[[M1]], %[[G]]

// -----

// Tests that a layer parameter and its state in the optimizer-style entry (outside the
// layer) are read and written with their stacked types.
module @stacked_assign {
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.state @block.g.m of @block.g : !mt.tensor<[layers=2, hidden=4], f32>
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=4], f32>
    %y = mt.mul %x, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @optimizer_step(%grad: !mt.tensor<[layers=2, hidden=4], f32>) {
    %m = mt.param_ref @block.g.m : !mt.tensor<[layers=2, hidden=4], f32>
    %m1 = mt.add %m, %grad : !mt.tensor<[layers=2, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4], f32> -> !mt.tensor<[layers=2, hidden=4], f32>
    mt.assign @block.g.m, %m1 : !mt.tensor<[layers=2, hidden=4], f32>
    %g = mt.param_ref @block.g : !mt.tensor<[layers=2, hidden=4], f32>
    %g1 = mt.sub %g, %m1 : !mt.tensor<[layers=2, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4], f32> -> !mt.tensor<[layers=2, hidden=4], f32>
    mt.assign @block.g, %g1 : !mt.tensor<[layers=2, hidden=4], f32>
    return
  }
}
// CHECK-LABEL: module @stacked_assign
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: %[[GRAD:[^:]*]]: !mt.tensor<[layers=2, hidden=4], f32>,
// CHECK-SAME: %[[G:[^:]*]]: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g},
// CHECK-SAME: %[[M:[^:]*]]: !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.m})
// CHECK-SAME: -> (!mt.tensor<[layers=2, hidden=4], f32> {mt.param = @block.g}, !mt.tensor<[layers=2, hidden=4], f32> {mt.state = @block.g.m})
// CHECK: %[[M1:.*]] = mt.add %[[M]], %[[GRAD]]
// CHECK: %[[G1:.*]] = mt.sub %[[G]], %[[M1]]
// CHECK: return %[[G1]], %[[M1]]

// -----

// Tests that func.call passes the callee's new arguments and takes its new results, which
// later reads in the caller see.
module @call {
  mt.param @w : !mt.tensor<[hidden=4], f32> init zeros
  func.func @update(%d: !mt.tensor<[hidden=4], f32>) {
    %w = mt.param_ref @w : !mt.tensor<[hidden=4], f32>
    %w1 = mt.add %w, %d : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    mt.assign @w, %w1 : !mt.tensor<[hidden=4], f32>
    return
  }
  func.func @twice(%d: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    call @update(%d) : (!mt.tensor<[hidden=4], f32>) -> ()
    call @update(%d) : (!mt.tensor<[hidden=4], f32>) -> ()
    %w = mt.param_ref @w : !mt.tensor<[hidden=4], f32>
    return %w : !mt.tensor<[hidden=4], f32>
  }
}
// CHECK-LABEL: module @call
// CHECK-LABEL: func.func @update(
// CHECK-SAME: -> (!mt.tensor<[hidden=4], f32> {mt.param = @w})
// CHECK-LABEL: func.func @twice(
// CHECK-SAME: %[[D:[^:]*]]: !mt.tensor<[hidden=4], f32>, %[[W:[^:]*]]: !mt.tensor<[hidden=4], f32> {mt.param = @w})
// CHECK-SAME: -> (!mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> {mt.param = @w})
// CHECK: %[[W1:.*]] = call @update(%[[D]], %[[W]])
// CHECK: %[[W2:.*]] = call @update(%[[D]], %[[W1]])
// CHECK: return %[[W2]], %[[W2]]

// -----

// Tests that a layer function that assigns cannot be repeated: a scan cannot return it.
module @assign_in_layer {
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    mt.assign @block.g, %x : !mt.tensor<[hidden=4], f32>
    return %x : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    // expected-error @below {{repeats '@block', which writes '@block.g' (mt.assign): a scan has no place to return written parameters or states}}
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a layer parameter cannot be passed by a repeat with fewer calls than the
// layer has instances (the largest count of the repeats of its functions).
module @count_mismatch {
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=4], f32>
    %y = mt.mul %x, %g : !mt.tensor<[hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %y = mt.repeat @block(%x) count 3 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    // expected-error @below {{'@block' reads layer parameter '@block.g', whose 3 instances are stacked along 'layers', but the repeat makes 2 calls stacked along 'layers'}}
    %z = mt.repeat @block(%y) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %z : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a model parameter that already has the repeat's stacking dimension cannot be
// broadcast along it.
module @broadcast_clash {
  mt.param @s : !mt.tensor<[layers=2], f32> init ones
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    %s = mt.param_ref @s : !mt.tensor<[layers=2], f32>
    %r = mt.reduce_sum %s over [layers] : !mt.tensor<[layers=2], f32> -> !mt.tensor<[], f32>
    %y = mt.mul %x, %r : !mt.tensor<[hidden=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    // expected-error @below {{cannot broadcast '@s' of type '!mt.tensor<[layers=2], f32>' along the stacking dimension 'layers', which it already has}}
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a recursive function is rejected (its arguments would depend on themselves).
module @recursive {
  mt.param @w : !mt.tensor<[hidden=4], f32> init zeros
  // expected-error @below {{'@f' calls itself (through mt.repeat or func.call): a recursive function cannot be outlined}}
  func.func @f(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %w = mt.param_ref @w : !mt.tensor<[hidden=4], f32>
    %y = call @f(%w) : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %y : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a module already outlined is rejected.
// expected-error @below {{module is already outlined ('mt.outlined'): its functions take parameters and states as arguments}}
module @outlined attributes {mt.outlined} {
  mt.param @w : !mt.tensor<[hidden=4], f32> init zeros
  func.func @forward(%w: !mt.tensor<[hidden=4], f32> {mt.param = @w}) -> !mt.tensor<[hidden=4], f32> {
    return %w : !mt.tensor<[hidden=4], f32>
  }
}

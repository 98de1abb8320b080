// RUN: mt-opt %s -split-input-file -mt-expert-load -verify-diagnostics | FileCheck %s

// Tests that the dispatch of a layer forward gets an expert_load of its indices, which the
// layer returns after its results, the repeat stacks over the layers, and forward_backward
// returns after its own results as an `expert_load` buffer.
// CHECK-LABEL: func.func @block.fwd
// CHECK-SAME: -> (!mt.tensor<[tokens=4, hidden=4], f32>, !mt.tensor<[experts=4], i64>)
// CHECK: %[[V:.*]], %[[I:.*]] = mt.topk
// CHECK: mt.dispatch %{{.*}}, %[[I]]
// CHECK: %[[N:.*]] = mt.expert_load %[[I]] k k to experts : <[tokens=4, k=2], i32> -> <[experts=4], i64>
// CHECK: return %{{.*}}, %[[N]] : !mt.tensor<[tokens=4, hidden=4], f32>, !mt.tensor<[experts=4], i64>
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[layers=3, experts=4], i64> {mt.buffer = "expert_load"})
// CHECK: %[[R:.*]]:2 = mt.repeat @block.fwd(%{{.*}}) count 3 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> (!mt.tensor<[tokens=4, hidden=4], f32>, !mt.tensor<[layers=3, experts=4], i64>)
// CHECK: %[[L:.*]] = mt.reduce_sum %[[R]]#0
// CHECK: return %[[L]], %[[R]]#1
module {
  func.func @block.fwd(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32> attributes {mt.layer_of = @block} {
    %v, %i = mt.topk %x over hidden k k : <[tokens=4, hidden=4], f32> -> <[tokens=4, k=2], f32>, <[tokens=4, k=2], i32>
    %d = mt.dispatch %x, %i k k to experts capacity cap dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[experts=4, cap=4, hidden=4], f32>
    return %x : !mt.tensor<[tokens=4, hidden=4], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block.fwd(%x) count 3 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [tokens, hidden] : <[tokens=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a layer with two dispatches (here to 4 and to 2 experts) returns one count per
// dispatch, in program order, each stacked and returned as its own buffer.
// CHECK-LABEL: func.func @block.fwd
// CHECK: mt.expert_load {{.*}} -> <[experts=4], i64>
// CHECK: mt.expert_load {{.*}} -> <[shared=2], i64>
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[layers=2, experts=4], i64> {mt.buffer = "expert_load"}, !mt.tensor<[layers=2, shared=2], i64> {mt.buffer = "expert_load"})
// CHECK: %[[R:.*]]:3 = mt.repeat @block.fwd
// CHECK: return %{{.*}}, %[[R]]#1, %[[R]]#2
module {
  func.func @block.fwd(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32> attributes {mt.layer_of = @block} {
    %v, %i = mt.topk %x over hidden k k : <[tokens=4, hidden=4], f32> -> <[tokens=4, k=2], f32>, <[tokens=4, k=2], i32>
    %d = mt.dispatch %x, %i k k to experts capacity cap dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[experts=4, cap=4, hidden=4], f32>
    %e = mt.dispatch %x, %i k k to shared capacity cap dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[shared=2, cap=4, hidden=4], f32>
    return %x : !mt.tensor<[tokens=4, hidden=4], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block.fwd(%x) count 2 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [tokens, hidden] : <[tokens=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a dense model (no dispatch in its layers) keeps its step as it is.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> !mt.tensor<[], f32>
// CHECK-NOT: mt.expert_load
module {
  func.func @block.fwd(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32> attributes {mt.layer_of = @block} {
    %y = mt.exp %x : <[tokens=4, hidden=4], f32>
    return %y : !mt.tensor<[tokens=4, hidden=4], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block.fwd(%x) count 2 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [tokens, hidden] : <[tokens=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a pipeline-parallel step (pp 2) is counted like any other: mt-pipeline-chunks
// later hands each chunk's forward the rows of its layers.
// CHECK-LABEL: func.func @block.fwd
// CHECK: mt.expert_load
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[layers=2, experts=4], i64> {mt.buffer = "expert_load"})
module attributes {mt.parallel = #mt.parallel<pp = 2>} {
  func.func @block.fwd(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32> attributes {mt.layer_of = @block} {
    %v, %i = mt.topk %x over hidden k k : <[tokens=4, hidden=4], f32> -> <[tokens=4, k=2], f32>, <[tokens=4, k=2], i32>
    %d = mt.dispatch %x, %i k k to experts capacity cap dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[experts=4, cap=4, hidden=4], f32>
    return %x : !mt.tensor<[tokens=4, hidden=4], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block.fwd(%x) count 2 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [tokens, hidden] : <[tokens=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the pass needs the differentiated step.
// expected-error @+1 {{mt-expert-load counts the routing of the training step 'forward_backward': run it after mt-autodiff}}
module {
  func.func @forward(%x: !mt.tensor<[tokens=4], f32>) -> !mt.tensor<[], f32> {
    %l = mt.reduce_sum %x over [tokens] : <[tokens=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a layer two repeats call returns its counts once (one expert_load per
// dispatch), each repeat stacking them over its own layers.
// CHECK-LABEL: func.func @block.fwd
// CHECK-SAME: -> (!mt.tensor<[tokens=4, hidden=4], f32>, !mt.tensor<[experts=4], i64>)
// CHECK-COUNT-1: mt.expert_load
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[layers=2, experts=4], i64> {mt.buffer = "expert_load"}, !mt.tensor<[layers=3, experts=4], i64> {mt.buffer = "expert_load"})
// CHECK: %[[A:.*]]:2 = mt.repeat @block.fwd(%{{.*}}) count 2
// CHECK: %[[B:.*]]:2 = mt.repeat @block.fwd(%[[A]]#0) count 3
// CHECK: return %{{.*}}, %[[A]]#1, %[[B]]#1
module {
  func.func @block.fwd(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32> attributes {mt.layer_of = @block} {
    %v, %i = mt.topk %x over hidden k k : <[tokens=4, hidden=4], f32> -> <[tokens=4, k=2], f32>, <[tokens=4, k=2], i32>
    %d = mt.dispatch %x, %i k k to experts capacity cap dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[experts=4, cap=4, hidden=4], f32>
    return %x : !mt.tensor<[tokens=4, hidden=4], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block.fwd(%x) count 2 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %z = mt.repeat @block.fwd(%y) count 3 {carried = 1 : i64} : (!mt.tensor<[tokens=4, hidden=4], f32>) -> !mt.tensor<[tokens=4, hidden=4], f32>
    %l = mt.reduce_sum %z over [tokens, hidden] : <[tokens=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

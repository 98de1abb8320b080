// RUN: mt-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(mtp-filled-all-to-all))' | FileCheck %s

// Tests that the all-to-alls of a dropless routing (4 tokens per rank, capacity 4 per rank)
// get the counts of the slots this rank filled: one expert_load of the routing's indices,
// after them, shared by both directions.
// CHECK-LABEL: func.func @dropless
// CHECK: %[[V:.*]], %[[I:.*]] = mt.topk
// CHECK-NEXT: %[[N:.*]] = mt.expert_load %[[I]] k k to experts : <[tokens=4, k=2], i32> -> <[experts=4], i64>
// CHECK: mtp.all_to_all %{{.*}} over "ep" from "capacity" to "experts" filled(%[[N]] : !mt.tensor<[experts=4], i64>)
// CHECK: mtp.all_to_all %{{.*}} over "ep" from "experts" to "capacity" filled(%[[N]] : !mt.tensor<[experts=4], i64>)
// CHECK-NOT: mt.expert_load
func.func @dropless(%x: !mt.tensor<[tokens=4, hidden=2], f32>, %logits: !mt.tensor<[tokens=4, experts=4], f32>) -> !mt.tensor<[tokens=4, hidden=2], f32> {
  %v, %i = mt.topk %logits over experts k k : <[tokens=4, experts=4], f32> -> <[tokens=4, k=2], f32>, <[tokens=4, k=2], i32>
  %d = mt.dispatch %x, %i k k to experts capacity capacity dropless : <[tokens=4, hidden=2], f32>, <[tokens=4, k=2], i32> -> <[experts=4, capacity=4, hidden=2], f32>
  %p = mtp.from_local %d : !mt.tensor<[experts=4, capacity=4, hidden=2], f32> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
  %b = mtp.all_to_all %a over "ep" from "experts" to "capacity" : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
  %l = mtp.to_local %b : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mt.tensor<[experts=4, capacity=4, hidden=2], f32>
  %c = mt.combine %l, %i, %v k k from experts capacity capacity : <[experts=4, capacity=4, hidden=2], f32>, <[tokens=4, k=2], i32>, <[tokens=4, k=2], f32> -> <[tokens=4, hidden=2], f32>
  return %c : !mt.tensor<[tokens=4, hidden=2], f32>
}

// -----

// Tests that the backward, whose routing is combine_grad and combine (dispatch's gradient)
// on saved indices, counts them at the start of the function.
// CHECK-LABEL: func.func @backward
// CHECK-NEXT: %[[N:.*]] = mt.expert_load %arg1 k k to experts
// CHECK: mtp.all_to_all %{{.*}} filled(%[[N]] : !mt.tensor<[experts=4], i64>)
func.func @backward(%y: !mt.tensor<[experts=4, capacity=4, hidden=2], f32>, %i: !mt.tensor<[tokens=4, k=2], i32>, %w: !mt.tensor<[tokens=4, k=2], f32>, %g: !mt.tensor<[tokens=4, hidden=2], f32>) -> !mt.tensor<[tokens=4, hidden=2], f32> {
  %dy, %dw = mt.combine_grad %y, %i, %w, %g k k from experts capacity capacity : <[experts=4, capacity=4, hidden=2], f32>, <[tokens=4, k=2], i32>, <[tokens=4, k=2], f32>, <[tokens=4, hidden=2], f32> -> <[experts=4, capacity=4, hidden=2], f32>, <[tokens=4, k=2], f32>
  %p = mtp.from_local %dy : !mt.tensor<[experts=4, capacity=4, hidden=2], f32> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
  %b = mtp.all_to_all %a over "ep" from "experts" to "capacity" : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}> -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
  %l = mtp.to_local %b : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mt.tensor<[experts=4, capacity=4, hidden=2], f32>
  %c = mt.combine %l, %i, %w k k from experts capacity capacity : <[experts=4, capacity=4, hidden=2], f32>, <[tokens=4, k=2], i32>, <[tokens=4, k=2], f32> -> <[tokens=4, hidden=2], f32>
  return %c : !mt.tensor<[tokens=4, hidden=2], f32>
}

// -----

// Tests that routing with a capacity factor (capacity 2 for 4 tokens per rank: not
// dropless) keeps the static all-to-all, which moves every slot.
// CHECK-LABEL: func.func @capacity_factor
// CHECK-NOT: mt.expert_load
// CHECK-NOT: filled
func.func @capacity_factor(%x: !mt.tensor<[tokens=4, hidden=2], f32>, %i: !mt.tensor<[tokens=4, k=2], i32>) -> !mtp.tensor<[experts=4, capacity=4, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}> {
  %d = mt.dispatch %x, %i k k to experts capacity capacity factor 1.0 : <[tokens=4, hidden=2], f32>, <[tokens=4, k=2], i32> -> <[experts=4, capacity=2, hidden=2], f32>
  %p = mtp.from_local %d : !mt.tensor<[experts=4, capacity=2, hidden=2], f32> -> !mtp.tensor<[experts=4, capacity=4, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=4, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=4, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
  return %a : !mtp.tensor<[experts=4, capacity=4, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
}

// -----

// Tests that an all-to-all between other dimensions than the routing's stays static, as
// does one whose slot dimension is split over a second axis too (its parts are not the
// slots one rank fills).
// CHECK-LABEL: func.func @other_moves
// CHECK-NOT: mt.expert_load
// CHECK-NOT: filled
func.func @other_moves(%x: !mt.tensor<[tokens=4, hidden=4], f32>, %i: !mt.tensor<[tokens=4, k=2], i32>, %s: !mtp.tensor<[seq=4, heads=4], f32, <[ep = 2]>, split {seq = [ep]}>,
                       %t: !mtp.tensor<[experts=4, capacity=16, hidden=2], f32, <[tp = 2, ep = 2]>, split {capacity = [tp, ep]}>) {
  %d = mt.dispatch %x, %i k k to experts capacity capacity dropless : <[tokens=4, hidden=4], f32>, <[tokens=4, k=2], i32> -> <[experts=4, capacity=4, hidden=4], f32>
  %a = mtp.all_to_all %s over "ep" from "seq" to "heads" : !mtp.tensor<[seq=4, heads=4], f32, <[ep = 2]>, split {seq = [ep]}> -> !mtp.tensor<[seq=4, heads=4], f32, <[ep = 2]>, split {heads = [ep]}>
  %b = mtp.all_to_all %t over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=16, hidden=2], f32, <[tp = 2, ep = 2]>, split {capacity = [tp, ep]}> -> !mtp.tensor<[experts=4, capacity=16, hidden=2], f32, <[tp = 2, ep = 2]>, split {capacity = [tp], experts = [ep]}>
  return
}

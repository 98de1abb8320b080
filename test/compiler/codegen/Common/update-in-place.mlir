// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-update-in-place | FileCheck %s

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// Tests a whole-model step (the norm a result): the update, and only it, moves under the
// finite-norm condition; the else branch yields the arguments; each new value is
// materialized in its argument at its result's position.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[G:[^:]*]]: tensor<4xf32> {mt.grad = @w}, %[[W:[^:]*]]: tensor<4xf32> {mt.param = @w}, %[[M:[^:]*]]: tensor<4xf32> {mt.state = @w.m})
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>)
// CHECK: %[[LR:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<f32>)
// CHECK: %[[N:.*]] = tensor.extract %[[SQ]][] : tensor<f32>
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: %[[OK:.*]] = arith.cmpf olt, %[[N]], %[[INF]] : f32
// CHECK: %[[IF:.*]]:2 = scf.if %[[OK]] -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK:   %[[NEW:.*]]:2 = linalg.generic {{.*}} ins(%[[G]], %[[W]], %[[M]], %[[LR]] :
// CHECK:   scf.yield %[[NEW]]#0, %[[NEW]]#1 : tensor<4xf32>, tensor<4xf32>
// CHECK: } else {
// CHECK:   scf.yield %[[W]], %[[M]] : tensor<4xf32>, tensor<4xf32>
// CHECK: }
// CHECK: %[[NW:.*]] = bufferization.materialize_in_destination %[[IF]]#0 in %[[W]]
// CHECK: %[[NM:.*]] = bufferization.materialize_in_destination %[[IF]]#1 in %[[M]]
// CHECK: return %[[SQ]], %[[LR]], %[[NW]], %[[NM]] :
func.func @optimizer_step(%g: tensor<4xf32> {mt.grad = @w}, %w: tensor<4xf32> {mt.param = @w},
                          %m: tensor<4xf32> {mt.state = @w.m})
    -> (tensor<f32> {mt.buffer = "grad_norm"}, tensor<f32> {mt.buffer = "lr"},
        tensor<4xf32> {mt.param = @w}, tensor<4xf32> {mt.state = @w.m}) {
  %zero = tensor.empty() : tensor<f32>
  %sq = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%g : tensor<4xf32>) outs(%zero : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %e = tensor.empty() : tensor<f32>
  %lr = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%sq : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<f32>
  %e0 = tensor.empty() : tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %new:2 = linalg.generic {indexing_maps = [#id, #id, #id, #scalar, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %w, %m, %lr : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
      outs(%e0, %e1 : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%gi: f32, %wi: f32, %mi: f32, %l: f32, %o0: f32, %o1: f32):
    %m2 = arith.addf %mi, %gi : f32
    %d = arith.mulf %l, %m2 : f32
    %w2 = arith.subf %wi, %d : f32
    linalg.yield %w2, %m2 : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %sq, %lr, %new#0, %new#1 : tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// Tests a pipeline stage's step (the norm an argument): the scalars it computes from the
// step stay outside, the updates of both parameters move.
// CHECK-LABEL: func.func @stage_step
// CHECK-SAME: %[[NORM:[^:]*]]: tensor<f32> {mt.buffer = "grad_norm"}
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {mt.param = @w}, %[[V:[^:]*]]: tensor<4xf32> {mt.param = @v}
// CHECK: %[[LR:.*]] = linalg.generic
// CHECK: tensor.extract %[[NORM]][]
// CHECK: %[[IF:.*]]:2 = scf.if
// CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %[[LR]] :
// CHECK:   %[[W2:.*]] = arith.subf %[[W]]
// CHECK:   %[[V2:.*]] = arith.addf %[[V]]
// CHECK:   scf.yield %[[W2]], %[[V2]]
// CHECK: %[[NW:.*]] = bufferization.materialize_in_destination %[[IF]]#0 in %[[W]]
// CHECK: %[[NV:.*]] = bufferization.materialize_in_destination %[[IF]]#1 in %[[V]]
// CHECK: return %[[LR]], %[[NW]], %[[NV]] : tensor<f32>, tensor<4xf32>, tensor<4xf32>
func.func @stage_step(%step: tensor<f32> {mt.buffer = "step"},
                      %norm: tensor<f32> {mt.buffer = "grad_norm"},
                      %g: tensor<4xf32> {mt.grad = @w}, %w: tensor<4xf32> {mt.param = @w},
                      %v: tensor<4xf32> {mt.param = @v})
    -> (tensor<f32> {mt.buffer = "lr"}, tensor<4xf32> {mt.param = @w},
        tensor<4xf32> {mt.param = @v}) {
  %e = tensor.empty() : tensor<f32>
  %lr = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%step : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<f32>
  %e0 = tensor.empty() : tensor<4xf32>
  %new = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%g, %lr : tensor<4xf32>, tensor<f32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%gi: f32, %l: f32, %o: f32):
    %d = arith.mulf %l, %gi : f32
    linalg.yield %d : f32
  } -> tensor<4xf32>
  %w2 = arith.subf %w, %new : tensor<4xf32>
  %v2 = arith.addf %v, %new : tensor<4xf32>
  return %lr, %w2, %v2 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a function returning no new value of an argument (a forward and backward: its
// results are gradients) is left alone.
// CHECK-LABEL: func.func @forward_backward
// CHECK-NOT: scf.if
// CHECK-NOT: materialize_in_destination
// CHECK: return %{{.*}} : tensor<4xf32>
func.func @forward_backward(%w: tensor<4xf32> {mt.param = @w}) -> (tensor<4xf32> {mt.grad = @w}) {
  %g = arith.addf %w, %w : tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that an update without a gradient norm to guard it is an error.
// expected-error @below {{updates parameters or states in place but has no f32 scalar grad_norm to skip a non-finite step with}}
func.func @no_norm(%g: tensor<4xf32>, %w: tensor<4xf32> {mt.param = @w})
    -> (tensor<4xf32> {mt.param = @w}) {
  %w2 = arith.subf %w, %g : tensor<4xf32>
  return %w2 : tensor<4xf32>
}

// -----

// Tests that a value both a new parameter and another result need stays outside the
// condition (computed in every step); only the new value's materialization is guarded.
// CHECK-LABEL: func.func @shared_value
// CHECK-SAME: (%[[G:[^:]*]]: tensor<4xf32>, %[[W:[^:]*]]: tensor<4xf32> {mt.param = @w}
// CHECK: %[[W2:.*]] = arith.subf %[[W]], %[[G]]
// CHECK: %[[COPY:.*]] = arith.addf %[[W2]], %[[G]]
// CHECK: %[[IF:.*]] = scf.if
// CHECK-NEXT: scf.yield %[[W2]]
// CHECK: else
// CHECK-NEXT: scf.yield %[[W]]
// CHECK: %[[NW:.*]] = bufferization.materialize_in_destination %[[IF]] in %[[W]]
// CHECK: return %[[COPY]], %[[NW]]
func.func @shared_value(%g: tensor<4xf32>, %w: tensor<4xf32> {mt.param = @w},
                        %norm: tensor<f32> {mt.buffer = "grad_norm"})
    -> (tensor<4xf32>, tensor<4xf32> {mt.param = @w}) {
  %w2 = arith.subf %w, %g : tensor<4xf32>
  %copy = arith.addf %w2, %g : tensor<4xf32>
  return %copy, %w2 : tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// Tests that the collectives writing the buffer the norm is read from stay before the
// branch, with the squares they sum and the scaled gradient those share with the update: no
// def-use edge leads from `bufferization.to_tensor` to the call writing its buffer, nor from
// the second all-reduce (over another mesh axis) to the first, whose output it reads
// through a pointer.
// CHECK-LABEL: func.func @collective_norm
// CHECK: %[[SG:.*]] = arith.mulf
// CHECK: linalg.generic {{.*}} ins(%[[SG]] : tensor<4xf32>)
// CHECK: bufferization.to_buffer
// CHECK: call @mtc_all_reduce
// CHECK: call @mtc_all_reduce
// CHECK: %[[NORM:.*]] = bufferization.to_tensor
// CHECK: tensor.extract %[[NORM]][]
// CHECK: scf.if
// CHECK-NEXT: arith.subf %{{.*}}, %[[SG]]
func.func private @mtc_all_reduce(i64, i64)
func.func @collective_norm(%g: tensor<4xf32> {mt.grad = @w}, %w: tensor<4xf32> {mt.param = @w},
                           %scale: tensor<4xf32>)
    -> (tensor<f32> {mt.buffer = "grad_norm"}, tensor<4xf32> {mt.param = @w}) {
  %sg = arith.mulf %g, %scale : tensor<4xf32>
  %zero = tensor.empty() : tensor<f32>
  %sq = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%sg : tensor<4xf32>) outs(%zero : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %in = bufferization.to_buffer %sq read_only : tensor<f32> to memref<f32>
  %mid = memref.alloc() : memref<f32>
  %pi = memref.extract_aligned_pointer_as_index %in : memref<f32> -> index
  %pm = memref.extract_aligned_pointer_as_index %mid : memref<f32> -> index
  %i = arith.index_cast %pi : index to i64
  %m = arith.index_cast %pm : index to i64
  func.call @mtc_all_reduce(%i, %m) : (i64, i64) -> ()
  %out = memref.alloc() : memref<f32>
  %pm2 = memref.extract_aligned_pointer_as_index %mid : memref<f32> -> index
  %po = memref.extract_aligned_pointer_as_index %out : memref<f32> -> index
  %m2 = arith.index_cast %pm2 : index to i64
  %o = arith.index_cast %po : index to i64
  func.call @mtc_all_reduce(%m2, %o) : (i64, i64) -> ()
  %norm = bufferization.to_tensor %out restrict writable : memref<f32> to tensor<f32>
  %w2 = arith.subf %w, %sg : tensor<4xf32>
  return %norm, %w2 : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that an update in a function of several blocks is refused (the branch is built
// around one block's ops).
// expected-error @below {{updates its arguments in place but has several blocks}}
func.func @blocks(%g: tensor<4xf32>, %w: tensor<4xf32> {mt.param = @w},
                  %norm: tensor<f32> {mt.buffer = "grad_norm"})
    -> (tensor<4xf32> {mt.param = @w}) {
  cf.br ^next
^next:
  %w2 = arith.subf %w, %g : tensor<4xf32>
  return %w2 : tensor<4xf32>
}

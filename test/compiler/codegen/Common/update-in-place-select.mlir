// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-update-in-place=select-in-kernels | FileCheck %s

// mtc-update-in-place as the GPU backend runs it: no branch (the host code cannot read the
// norm in device memory); each update kernel takes the norm and keeps the old element when
// it is not finite.

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// Tests that the generic producing the new parameter and state takes the norm as a 0-d
// input after its inputs and yields the old elements under a non-finite norm; nothing else
// changes and each new value is materialized in its argument.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[G:[^:]*]]: tensor<4xf32> {mt.grad = @w}, %[[W:[^:]*]]: tensor<4xf32> {mt.param = @w}, %[[M:[^:]*]]: tensor<4xf32> {mt.state = @w.m}, %[[NORM:[^:]*]]: tensor<f32> {mt.buffer = "grad_norm"})
// CHECK-NOT: scf.if
// CHECK: %[[NEW:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ID]], #[[SCALAR]], #[[ID]], #[[ID]]]
// CHECK-SAME: ins(%[[G]], %[[W]], %[[M]], %[[NORM]] :
// CHECK: ^bb0(%[[GI:[^:]*]]: f32, %[[WI:[^:]*]]: f32, %[[MI:[^:]*]]: f32, %[[N:[^:]*]]: f32,
// CHECK: %[[M2:.*]] = arith.addf %[[MI]], %[[GI]]
// CHECK: %[[W2:.*]] = arith.subf %[[WI]], %[[M2]]
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: %[[OK:.*]] = arith.cmpf olt, %[[N]], %[[INF]] : f32
// CHECK: %[[KW:.*]] = arith.select %[[OK]], %[[W2]], %[[WI]] : f32
// CHECK: %[[KM:.*]] = arith.select %[[OK]], %[[M2]], %[[MI]] : f32
// CHECK: linalg.yield %[[KW]], %[[KM]] : f32, f32
// CHECK: %[[NW:.*]] = bufferization.materialize_in_destination %[[NEW]]#0 in %[[W]]
// CHECK: %[[NM:.*]] = bufferization.materialize_in_destination %[[NEW]]#1 in %[[M]]
// CHECK: return %[[NW]], %[[NM]] :
func.func @optimizer_step(%g: tensor<4xf32> {mt.grad = @w}, %w: tensor<4xf32> {mt.param = @w},
                          %m: tensor<4xf32> {mt.state = @w.m},
                          %norm: tensor<f32> {mt.buffer = "grad_norm"})
    -> (tensor<4xf32> {mt.param = @w}, tensor<4xf32> {mt.state = @w.m}) {
  %e0 = tensor.empty() : tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %new:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %w, %m : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      outs(%e0, %e1 : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%gi: f32, %wi: f32, %mi: f32, %o0: f32, %o1: f32):
    %m2 = arith.addf %mi, %gi : f32
    %w2 = arith.subf %wi, %m2 : f32
    linalg.yield %w2, %m2 : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %new#0, %new#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a new value not computed by a generic reading the old one is an error: the
// kernel has nothing to keep.
// expected-error @below {{cannot guard the update of argument 1 in a kernel: its new value is not computed by a linalg.generic reading the argument where it writes the value}}
func.func @not_a_kernel(%g: tensor<4xf32>, %w: tensor<4xf32> {mt.param = @w},
                        %norm: tensor<f32> {mt.buffer = "grad_norm"})
    -> (tensor<4xf32> {mt.param = @w}) {
  %w2 = arith.subf %w, %g : tensor<4xf32>
  return %w2 : tensor<4xf32>
}

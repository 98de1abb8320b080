// RUN: mt-opt %s -split-input-file -mtc-bufferize-pipeline | FileCheck %s

// Tests that the bufferization both backends share fuses an elementwise chain, turns the
// results into caller-allocated out-parameters written in place, and gives a value
// returned twice its own out-parameter (mtc-copy-repeated-results first).
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<8xf32>, %[[R0:.*]]: memref<8xf32>, %[[R1:.*]]: memref<8xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : memref<8xf32>) outs(%[[R0]] : memref<8xf32>)
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: linalg.copy ins(%[[R0]] : memref<8xf32>) outs(%[[R1]] : memref<8xf32>)
// CHECK-NEXT: return
// CHECK-NOT: memref.alloc
#map = affine_map<(d0) -> (d0)>
func.func @step(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  return %b, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that an optimizer step comes out updating its parameter and state in place: under
// the finite-norm branch the update kernels read and write the argument buffers (no copy,
// no temporary), and the function returns nothing but the norm, in its out-parameter.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[G:[^:]*]]: memref<8xf32> {mt.grad = @w}, %[[W:[^:]*]]: memref<8xf32> {mt.param = @w}, %[[M:[^:]*]]: memref<8xf32> {mt.state = @w.m}, %[[NORM:[^:]*]]: memref<f32> {mt.buffer = "grad_norm"}) {
// CHECK-NOT: memref.alloc
// CHECK: outs(%[[NORM]] : memref<f32>)
// CHECK: %[[N:.*]] = memref.load %[[NORM]][]
// CHECK: %[[OK:.*]] = arith.cmpf olt, %[[N]]
// CHECK: scf.if %[[OK]] {
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[M]] : memref<8xf32>, memref<8xf32>) outs(%[[M]] : memref<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[W]], %[[M]] : memref<8xf32>, memref<8xf32>) outs(%[[W]] : memref<8xf32>)
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.alloc
// CHECK: return{{$}}
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @optimizer_step(%g: tensor<8xf32> {mt.grad = @w}, %w: tensor<8xf32> {mt.param = @w},
                          %m: tensor<8xf32> {mt.state = @w.m})
    -> (tensor<f32> {mt.buffer = "grad_norm"}, tensor<8xf32> {mt.param = @w},
        tensor<8xf32> {mt.state = @w.m}) {
  %zero = tensor.empty() : tensor<f32>
  %sq = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%g : tensor<8xf32>) outs(%zero : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %e0 = tensor.empty() : tensor<8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %m : tensor<8xf32>, tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%gi: f32, %mi: f32, %o: f32):
    %n = arith.addf %mi, %gi : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %m2 : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%wi: f32, %mi: f32, %o: f32):
    %n = arith.subf %wi, %mi : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %sq, %w2, %m2 : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

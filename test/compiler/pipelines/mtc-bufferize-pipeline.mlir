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

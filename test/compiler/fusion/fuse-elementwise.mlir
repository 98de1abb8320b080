// RUN: mt-opt %s -mtc-fuse-elementwise -split-input-file | FileCheck %s

// Tests that a chain of elementwise ops (bias add, then tanh) becomes one loop nest.
// CHECK-LABEL: func.func @chain
// CHECK:         %[[EMPTY:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:           arith.addf
// CHECK:           math.tanh
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that an elementwise producer fuses into a reduction that consumes it.
// CHECK-LABEL: func.func @into_reduction
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
func.func @into_reduction(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

// Tests that a producer with two users stays on its own (fusing would compute it twice),
// and that a named op (a batch_matmul, a BLAS call later) is not fused.
// CHECK-LABEL: func.func @shared_and_named
// CHECK:         %[[EXP:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         linalg.batch_matmul ins(%[[EXP]], %[[EXP]]
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}} : tensor<1x4x4xf32>)
// CHECK:           math.tanh
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @shared_and_named(%x: tensor<1x4x4xf32>, %z: tensor<1x4x4xf32>) -> tensor<1x4x4xf32> {
  %e = tensor.empty() : tensor<1x4x4xf32>
  %exp = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x4x4xf32>) outs(%e : tensor<1x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<1x4x4xf32>
  %mm = linalg.batch_matmul ins(%exp, %exp : tensor<1x4x4xf32>, tensor<1x4x4xf32>)
      outs(%z : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %t = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm : tensor<1x4x4xf32>) outs(%e : tensor<1x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.tanh %a : f32
    linalg.yield %v : f32
  } -> tensor<1x4x4xf32>
  return %t : tensor<1x4x4xf32>
}

// -----

// Tests that a producer whose body calls a function (dropout's decision) is fused and then
// erased, not left behind as a loop without results that still calls the function.
// CHECK-LABEL: func.func @calling_producer
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: return
#id = affine_map<(d0) -> (d0)>
func.func private @decide(i64) -> f32
func.func @calling_producer(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = arith.index_cast %i : index to i64
    %s = func.call @decide(%j) : (i64) -> f32
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%scaled, %x : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %sum : tensor<8xf32>
}

// -----

// Tests that a costly producer (libm's sin, a table per position) is not fused into a
// consumer that reads it broadcast over another dimension: fused, sin would run once per
// element of the consumer instead of once per position. The table stays its own loop nest.
// CHECK-LABEL: func.func @costly_broadcast
// CHECK:         %[[TABLE:.*]] = linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<8xf64>)
// CHECK:           math.sin
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%arg0, %[[TABLE]] : tensor<4x8xf64>, tensor<8xf64>)
// CHECK-NOT:       math.sin
// CHECK:           arith.mulf
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#one = affine_map<(d0) -> (d0)>
func.func @costly_broadcast(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %t = tensor.empty() : tensor<8xf64>
  %sin = linalg.generic {indexing_maps = [#one], iterator_types = ["parallel"]}
      outs(%t : tensor<8xf64>) {
  ^bb0(%o: f64):
    %i = linalg.index 0 : index
    %j = arith.index_castui %i : index to i64
    %a = arith.uitofp %j : i64 to f64
    %s = math.sin %a : f64
    linalg.yield %s : f64
  } -> tensor<8xf64>
  %e = tensor.empty() : tensor<4x8xf64>
  %0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sin : tensor<4x8xf64>, tensor<8xf64>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%a: f64, %s: f64, %o: f64):
    %m = arith.mulf %a, %s : f64
    linalg.yield %m : f64
  } -> tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

// -----

// Tests that the same costly producer read without a broadcast (one consumer iteration per
// element) is fused: nothing is recomputed.
// CHECK-LABEL: func.func @costly_same_shape
// CHECK:         linalg.generic
// CHECK:           math.sin
// CHECK:           arith.mulf
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @costly_same_shape(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %e = tensor.empty() : tensor<4x8xf64>
  %sin = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<4x8xf64>) {
  ^bb0(%o: f64):
    %i = linalg.index 1 : index
    %j = arith.index_castui %i : index to i64
    %a = arith.uitofp %j : i64 to f64
    %s = math.sin %a : f64
    linalg.yield %s : f64
  } -> tensor<4x8xf64>
  %0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sin : tensor<4x8xf64>, tensor<4x8xf64>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%a: f64, %s: f64, %o: f64):
    %m = arith.mulf %a, %s : f64
    linalg.yield %m : f64
  } -> tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

// -----

// Tests that a cheap producer (positions from linalg.index, as mt.iota) is still fused into
// a consumer that broadcasts it: recomputing it costs less than storing and loading it.
// CHECK-LABEL: func.func @cheap_broadcast
// CHECK:         linalg.generic
// CHECK:           linalg.index 1
// CHECK:           arith.uitofp
// CHECK:           arith.mulf
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#one = affine_map<(d0) -> (d0)>
func.func @cheap_broadcast(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %t = tensor.empty() : tensor<8xf64>
  %iota = linalg.generic {indexing_maps = [#one], iterator_types = ["parallel"]}
      outs(%t : tensor<8xf64>) {
  ^bb0(%o: f64):
    %i = linalg.index 0 : index
    %j = arith.index_castui %i : index to i64
    %a = arith.uitofp %j : i64 to f64
    linalg.yield %a : f64
  } -> tensor<8xf64>
  %e = tensor.empty() : tensor<4x8xf64>
  %0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %iota : tensor<4x8xf64>, tensor<8xf64>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%a: f64, %s: f64, %o: f64):
    %m = arith.mulf %a, %s : f64
    linalg.yield %m : f64
  } -> tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

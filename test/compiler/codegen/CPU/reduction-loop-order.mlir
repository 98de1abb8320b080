// RUN: mt-opt %s --mtc-reduction-loop-order --split-input-file | FileCheck %s

// Tests that a sum over the outer dimensions of [b, s, h] (a bias gradient), which
// mt-to-linalg iterates h first, becomes b, s, h: the innermost loop walks the input's
// contiguous dimension and accumulates into the result row, in the same order (no
// reassociation).
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @bias_grad
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], iterator_types = ["reduction", "reduction", "parallel"]}
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
#in = affine_map<(h, b, s) -> (b, s, h)>
#out = affine_map<(h, b, s) -> (h)>
func.func @bias_grad(%x: memref<2x3x8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<2x3x8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sum = arith.addf %acc, %a : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Tests that a reduction already in its input's order, and an elementwise op, keep their
// loops; the row sum, reducing in the innermost loop, accumulates reassociably (the
// elementwise op and the product feeding the sum keep their flags).
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_sum
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addf %{{.*}}, %[[P]] fastmath<reassoc> : f32
// CHECK-LABEL: func.func @transpose
// CHECK: iterator_types = ["parallel", "parallel"]
#id2 = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#t = affine_map<(i, j) -> (j, i)>
func.func @row_sum(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %sum = arith.addf %acc, %p : f32
    linalg.yield %sum : f32
  }
  return
}
func.func @transpose(%x: memref<8x4xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#t, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Tests that the largest input read through a permutation decides (not a broadcast operand),
// that linalg.index follows the interchange, and that the sum, now in the outer loop, is
// not reassociated.
// CHECK-DAG: #[[$SECOND:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @follows_largest
// CHECK: indexing_maps = [#[[$SECOND]], #{{.*}}, #[[$SECOND]]], iterator_types = ["reduction", "parallel"]
// CHECK: %[[I0:.*]] = linalg.index 0 : index
// CHECK: %[[I1:.*]] = linalg.index 1 : index
// CHECK: %[[J:.*]] = affine.apply #[[$SECOND]](%[[I0]], %[[I1]])
// CHECK: arith.index_cast %[[J]]
// CHECK-NOT: fastmath
// CHECK: return
#col = affine_map<(j, i) -> (j)>
#big = affine_map<(j, i) -> (i, j)>
#acc = affine_map<(j, i) -> (j)>
func.func @follows_largest(%scale: memref<8xf32>, %x: memref<4x8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#col, #big, #acc], iterator_types = ["parallel", "reduction"]}
      ins(%scale, %x : memref<8xf32>, memref<4x8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%s: f32, %a: f32, %acc: f32):
    %j = linalg.index 0 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    %p = arith.mulf %s, %a : f32
    %q = arith.mulf %p, %jf : f32
    %sum = arith.addf %acc, %q : f32
    linalg.yield %sum : f32
  }
  return
}

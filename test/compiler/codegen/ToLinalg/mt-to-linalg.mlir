// RUN: mt-opt %s -split-input-file -mt-to-linalg -verify-diagnostics | FileCheck %s

// Tests that named broadcasting with the rhs dimensions in another order is an indexing map
// that picks the rhs dimensions by name, and that signatures become builtin tensors.
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$HS:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func.func @broadcast_reordered
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[Y:.*]]: tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x4x8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID3]], #[[$HS]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<2x4x8xf32>, tensor<8x4xf32>) outs(%[[E]] : tensor<2x4x8xf32>)
// CHECK: arith.addf
func.func @broadcast_reordered(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
                               %y: !mt.tensor<[hidden=8, seq=4], f32>)
    -> !mt.tensor<[batch=2, seq=4, hidden=8], f32> {
  %0 = mt.add %x, %y : !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
      !mt.tensor<[hidden=8, seq=4], f32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
  return %0 : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
}

// -----

// Tests that dimensions only the rhs has follow the lhs's in the iteration space (an outer
// product), and that the other binary ops get their scalar bodies.
// CHECK-DAG: #[[$D0:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$D1:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @outer
// CHECK: linalg.generic {indexing_maps = [#[[$D0]], #[[$D1]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.subf
// CHECK: linalg.generic
// CHECK: arith.divf
// CHECK: linalg.generic
// CHECK: arith.maximumf
// CHECK: linalg.generic
// CHECK: math.powf
// CHECK: linalg.generic
// CHECK: %[[GT:.*]] = arith.cmpf ogt
// CHECK: arith.select %[[GT]], %{{.*}}, %{{.*}} : f32
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK: return {{.*}} : tensor<4x8xf32>
func.func @outer(%v: !mt.tensor<[seq=4], f32>, %w: !mt.tensor<[hidden=8], f32>)
    -> !mt.tensor<[seq=4, hidden=8], f32> {
  %0 = mt.sub %v, %w : !mt.tensor<[seq=4], f32>, !mt.tensor<[hidden=8], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  %1 = mt.div %0, %w : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[hidden=8], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  %2 = mt.max %1, %v : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[seq=4], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  %3 = mt.pow %2, %0 : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[seq=4, hidden=8], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  %4 = mt.greater %3, %2 : !mt.tensor<[seq=4, hidden=8], f32>,
      !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
  %5 = mt.mul %4, %3 : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[seq=4, hidden=8], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  return %5 : !mt.tensor<[seq=4, hidden=8], f32>
}

// -----

// Tests that a scalar constant operand is folded into the kernel body, that a returned
// constant is a fill of a rank-0 tensor, and that integer tensors use integer arithmetic.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @constants
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>, %[[I:.*]]: tensor<8xi32>) -> (tensor<8xf32>, tensor<f32>, tensor<8xi32>)
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[HALF]] : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]], iterator_types = ["parallel"]} ins(%[[X]] : tensor<8xf32>)
// CHECK: %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: arith.mulf %{{.*}}, %[[C]] : f32
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[I]], %[[I]] : tensor<8xi32>, tensor<8xi32>)
// CHECK: arith.addi
// CHECK: return %{{.*}}, %[[FILL]], %{{.*}} : tensor<8xf32>, tensor<f32>, tensor<8xi32>
func.func @constants(%x: !mt.tensor<[n=8], f32>, %i: !mt.tensor<[n=8], i32>)
    -> (!mt.tensor<[n=8], f32>, !mt.tensor<[], f32>, !mt.tensor<[n=8], i32>) {
  %c = mt.constant 0.5 : !mt.tensor<[], f32>
  %0 = mt.mul %x, %c : !mt.tensor<[n=8], f32>, !mt.tensor<[], f32> -> !mt.tensor<[n=8], f32>
  %1 = mt.add %i, %i : !mt.tensor<[n=8], i32>, !mt.tensor<[n=8], i32> -> !mt.tensor<[n=8], i32>
  return %0, %c, %1 : !mt.tensor<[n=8], f32>, !mt.tensor<[], f32>, !mt.tensor<[n=8], i32>
}

// -----

// Tests the scalar bodies of the unary ops.
// CHECK-LABEL: func.func @unary
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: math.log
// CHECK: math.sqrt
// CHECK: math.rsqrt
// CHECK: math.tanh
// CHECK: math.cos
// sigmoid: 1 / (1 + exp(-x))
// CHECK: linalg.generic
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// relu: x > 0 ? x : 0
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[POS:.*]] = arith.cmpf ogt, %[[IN]]
// CHECK: arith.select %[[POS]], %[[IN]], %{{.*}} : f32
// silu: x * sigmoid(x)
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.mulf
func.func @unary(%x: !mt.tensor<[n=8], f32>) -> !mt.tensor<[n=8], f32> {
  %0 = mt.neg %x : !mt.tensor<[n=8], f32>
  %1 = mt.exp %0 : !mt.tensor<[n=8], f32>
  %2 = mt.log %1 : !mt.tensor<[n=8], f32>
  %3 = mt.sqrt %2 : !mt.tensor<[n=8], f32>
  %4 = mt.rsqrt %3 : !mt.tensor<[n=8], f32>
  %5 = mt.tanh %4 : !mt.tensor<[n=8], f32>
  %6 = mt.cos %5 : !mt.tensor<[n=8], f32>
  %7 = mt.sigmoid %6 : !mt.tensor<[n=8], f32>
  %8 = mt.relu %7 : !mt.tensor<[n=8], f32>
  %9 = mt.silu %8 : !mt.tensor<[n=8], f32>
  return %9 : !mt.tensor<[n=8], f32>
}

// -----

// Tests that gelu uses erf, gelu approximate the tanh form, and their derivatives the same
// functions.
// CHECK-LABEL: func.func @gelu
// CHECK: linalg.generic
// CHECK: arith.constant 0.707106769 : f32
// CHECK: math.erf
// CHECK: linalg.generic
// CHECK: arith.constant 4.471500e-02 : f32
// CHECK: math.tanh
// CHECK: linalg.generic
// CHECK-DAG: math.exp
// CHECK-DAG: math.erf
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK: return
func.func @gelu(%x: !mt.tensor<[n=8], f32>)
    -> (!mt.tensor<[n=8], f32>, !mt.tensor<[n=8], f32>, !mt.tensor<[n=8], f32>,
        !mt.tensor<[n=8], f32>) {
  %0 = mt.gelu %x : !mt.tensor<[n=8], f32>
  %1 = mt.gelu %x approximate : !mt.tensor<[n=8], f32>
  %2 = mt.gelu_grad %x : !mt.tensor<[n=8], f32>
  %3 = mt.gelu_grad %x approximate : !mt.tensor<[n=8], f32>
  return %0, %1, %2, %3 : !mt.tensor<[n=8], f32>, !mt.tensor<[n=8], f32>,
      !mt.tensor<[n=8], f32>, !mt.tensor<[n=8], f32>
}

// -----

// Tests that transpose and broadcast are kernels whose operand map reorders or projects,
// and that casts convert the element type.
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$T:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-DAG: #[[$B:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func.func @layout
// CHECK: linalg.generic {indexing_maps = [#[[$T]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}} : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<4x2x3xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK: linalg.generic {indexing_maps = [#[[$B]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}} : tensor<3x2xf32>) outs(%{{.*}} : tensor<2x5x3xf32>)
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @layout(%x: !mt.tensor<[a=2, b=3, c=4], f32>, %y: !mt.tensor<[b=3, a=2], f32>)
    -> (!mt.tensor<[c=4, a=2, b=3], f32>, !mt.tensor<[a=2, d=5, b=3], f32>,
        !mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[a=2, b=3, c=4], i32>,
        !mt.tensor<[a=2, b=3, c=4], bf16>) {
  %0 = mt.transpose %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[c=4, a=2, b=3], f32>
  %1 = mt.broadcast %y : !mt.tensor<[b=3, a=2], f32> to !mt.tensor<[a=2, d=5, b=3], f32>
  %2 = mt.cast %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[a=2, b=3, c=4], f64>
  %3 = mt.cast %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[a=2, b=3, c=4], i32>
  %4 = mt.cast %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[a=2, b=3, c=4], bf16>
  return %0, %1, %2, %3, %4 : !mt.tensor<[c=4, a=2, b=3], f32>,
      !mt.tensor<[a=2, d=5, b=3], f32>, !mt.tensor<[a=2, b=3, c=4], f64>,
      !mt.tensor<[a=2, b=3, c=4], i32>, !mt.tensor<[a=2, b=3, c=4], bf16>
}

// -----

// Tests that a reduction iterates over the kept dimensions (parallel) then the reduced ones
// (reduction), into a fill of the identity: 0 for sums, -inf for max; a mean divides by the
// number of reduced elements.
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @reduce
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x4x8xf32>) outs(%[[INIT]] : tensor<2x8xf32>)
// CHECK: arith.addf
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: arith.maximumf
// CHECK: iterator_types = ["reduction", "reduction", "reduction"]
// CHECK: arith.addf
// CHECK: iterator_types = []
// CHECK: arith.constant 6.400000e+01 : f32
// CHECK: arith.divf
func.func @reduce(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>)
    -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[seq=4], f32>, !mt.tensor<[], f32>) {
  %0 = mt.reduce_sum %x over [seq] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
      -> !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.reduce_max %x over [batch, hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
      -> !mt.tensor<[seq=4], f32>
  %2 = mt.reduce_mean %x over [batch, seq, hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
      -> !mt.tensor<[], f32>
  return %0, %1, %2 : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[seq=4], f32>,
      !mt.tensor<[], f32>
}

// -----

// Tests that a contraction with a batch dimension iterates over the result's dimensions
// (parallel) then the contracted one (reduction), each operand picking its dimensions by
// name, and accumulates into a zero fill. In f64: f32 contractions become
// linalg.batch_matmul instead (contract-to-gemm.mlir).
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
// CHECK-DAG: #[[$R:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @contract
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x8xf64>, %[[W:.*]]: tensor<8x2x16xf64>) -> tensor<2x4x16xf64>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f64) outs(%{{.*}} : tensor<2x4x16xf64>)
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$W]], #[[$R]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[W]] : tensor<2x4x8xf64>, tensor<8x2x16xf64>) outs(%[[INIT]] : tensor<2x4x16xf64>)
// CHECK-NEXT: ^bb0(%[[L:.*]]: f64, %[[RR:.*]]: f64, %[[ACC:.*]]: f64):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[L]], %[[RR]] : f64
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f64
// CHECK-NEXT: linalg.yield %[[S]] : f64
func.func @contract(%a: !mt.tensor<[batch=2, seq=4, hidden=8], f64>,
                    %w: !mt.tensor<[hidden=8, batch=2, ffn=16], f64>)
    -> !mt.tensor<[batch=2, seq=4, ffn=16], f64> {
  %0 = mt.contract %a, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f64>,
      !mt.tensor<[hidden=8, batch=2, ffn=16], f64> -> !mt.tensor<[batch=2, seq=4, ffn=16], f64>
  return %0 : !mt.tensor<[batch=2, seq=4, ffn=16], f64>
}

// -----

// Tests that calls between converted functions are converted with them.
// CHECK-LABEL: func.func @callee
// CHECK-SAME: (%{{.*}}: tensor<8xf32>) -> tensor<8xf32>
// CHECK-LABEL: func.func @caller
// CHECK: %[[R:.*]] = call @callee(%{{.*}}) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: return %[[R]] : tensor<8xf32>
func.func @callee(%x: !mt.tensor<[n=8], f32>) -> !mt.tensor<[n=8], f32> {
  %0 = mt.exp %x : !mt.tensor<[n=8], f32>
  return %0 : !mt.tensor<[n=8], f32>
}
func.func @caller(%x: !mt.tensor<[n=8], f32>) -> !mt.tensor<[n=8], f32> {
  %0 = func.call @callee(%x) : (!mt.tensor<[n=8], f32>) -> !mt.tensor<[n=8], f32>
  return %0 : !mt.tensor<[n=8], f32>
}

// -----

// Tests that rename is the same tensor, split an expand_shape, and merge a collapse_shape,
// after a transpose when the merged dimensions are not adjacent in the listed order.
// CHECK-LABEL: func.func @split_merge_rename
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
// CHECK: %[[S:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [4, 2, 3] : tensor<4x6xf32> into tensor<4x2x3xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x3x2xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[S]] : tensor<4x2x3xf32>) outs(%[[E]] : tensor<4x3x2xf32>) permutation = [0, 2, 1]
// CHECK: %[[M:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2]] : tensor<4x3x2xf32> into tensor<4x6xf32>
// CHECK: %[[A:.*]] = tensor.collapse_shape %[[S]] {{\[}}[0, 1], [2]] : tensor<4x2x3xf32> into tensor<8x3xf32>
// CHECK: return %[[M]], %[[A]] : tensor<4x6xf32>, tensor<8x3xf32>
func.func @split_merge_rename(%x: !mt.tensor<[seq=4, hidden=6], f32>)
    -> (!mt.tensor<[s=4, hd=6], f32>, !mt.tensor<[sh=8, head_dim=3], f32>) {
  %0 = mt.split %x hidden into [heads, head_dim]
      : !mt.tensor<[seq=4, hidden=6], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=3], f32>
  %1 = mt.merge %0 [head_dim, heads] into hd
      : !mt.tensor<[seq=4, heads=2, head_dim=3], f32> -> !mt.tensor<[seq=4, hd=6], f32>
  %2 = mt.rename %1 seq to s : !mt.tensor<[seq=4, hd=6], f32> -> !mt.tensor<[s=4, hd=6], f32>
  %3 = mt.merge %0 [seq, heads] into sh
      : !mt.tensor<[seq=4, heads=2, head_dim=3], f32> -> !mt.tensor<[sh=8, head_dim=3], f32>
  return %2, %3 : !mt.tensor<[s=4, hd=6], f32>, !mt.tensor<[sh=8, head_dim=3], f32>
}

// -----

// Tests that iota writes linalg.index, converted to the element type.
// CHECK-LABEL: func.func @iota
// CHECK: linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel"]} outs(%{{.*}} : tensor<5xf32>)
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[N:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: arith.sitofp %[[N]] : i64 to f32
// CHECK: linalg.generic
// CHECK: %[[J:.*]] = linalg.index 0 : index
// CHECK: arith.index_cast %[[J]] : index to i32
func.func @iota() -> (!mt.tensor<[pos=5], f32>, !mt.tensor<[pos=5], i32>) {
  %0 = mt.iota dim pos : !mt.tensor<[pos=5], f32>
  %1 = mt.iota dim pos : !mt.tensor<[pos=5], i32>
  return %0, %1 : !mt.tensor<[pos=5], f32>, !mt.tensor<[pos=5], i32>
}

// -----

// Tests that gather iterates over its result, reads the index through a projection map,
// clamps it into the table and extracts the table element.
// CHECK-DAG: #[[$IDS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[T:.*]]: tensor<5x3xf32>, %[[IDS:.*]]: tensor<2x4xi32>)
// CHECK: linalg.generic {indexing_maps = [#[[$IDS]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[IDS]] : tensor<2x4xi32>)
// CHECK: ^bb0(%[[ID:.*]]: i32, %{{.*}}: f32):
// CHECK: %[[C:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[LO:.*]] = arith.maxsi %[[C]], %{{.*}} : index
// CHECK: %[[ROW:.*]] = arith.minsi %[[LO]], %{{.*}} : index
// CHECK: %[[H:.*]] = linalg.index 2 : index
// CHECK: %[[V:.*]] = tensor.extract %[[T]][%[[ROW]], %[[H]]] : tensor<5x3xf32>
// CHECK: linalg.yield %[[V]] : f32
func.func @gather(%t: !mt.tensor<[vocab=5, hidden=3], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>)
    -> !mt.tensor<[batch=2, seq=4, hidden=3], f32> {
  %0 = mt.gather %t, %ids over vocab : !mt.tensor<[vocab=5, hidden=3], f32>,
      !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=3], f32>
  return %0 : !mt.tensor<[batch=2, seq=4, hidden=3], f32>
}

// -----

// Tests that embedding_grad is a loop nest over the index positions carrying the zeroed
// table, adding each gradient row into the table row (slice, add, insert back).
// CHECK-LABEL: func.func @embedding_grad
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi32>, %[[G:.*]]: tensor<2x4x3xf32>) -> tensor<3x5xf32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3x5xf32>)
// CHECK: %[[R:.*]] = scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC0:.*]] = %[[Z]]) -> (tensor<3x5xf32>)
// CHECK: scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ACC0]]) -> (tensor<3x5xf32>)
// CHECK: %[[ID:.*]] = tensor.extract %[[IDS]][%[[B]], %[[S]]] : tensor<2x4xi32>
// CHECK: %[[ROW:.*]] = arith.minsi
// CHECK: %[[GROW:.*]] = tensor.extract_slice %[[G]][%[[B]], %[[S]], 0] [1, 1, 3] [1, 1, 1] : tensor<2x4x3xf32> to tensor<3xf32>
// CHECK: %[[TROW:.*]] = tensor.extract_slice %[[ACC]][0, %[[ROW]]] [3, 1] [1, 1] : tensor<3x5xf32> to tensor<3xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[GROW]] : tensor<3xf32>) outs(%[[TROW]] : tensor<3xf32>)
// CHECK: ^bb0(%[[GV:.*]]: f32, %[[TV:.*]]: f32):
// CHECK: arith.addf %[[TV]], %[[GV]] : f32
// CHECK: %[[NEW:.*]] = tensor.insert_slice %[[SUM]] into %[[ACC]][0, %[[ROW]]] [3, 1] [1, 1] : tensor<3xf32> into tensor<3x5xf32>
// CHECK: scf.yield %[[NEW]] : tensor<3x5xf32>
// CHECK: return %[[R]] : tensor<3x5xf32>
func.func @embedding_grad(%ids: !mt.tensor<[batch=2, seq=4], i32>,
                          %g: !mt.tensor<[batch=2, seq=4, hidden=3], f32>)
    -> !mt.tensor<[hidden=3, vocab=5], f32> {
  %0 = mt.embedding_grad %ids, %g over vocab : !mt.tensor<[batch=2, seq=4], i32>,
      !mt.tensor<[batch=2, seq=4, hidden=3], f32> -> !mt.tensor<[hidden=3, vocab=5], f32>
  return %0 : !mt.tensor<[hidden=3, vocab=5], f32>
}

// -----

// Tests that rope computes its cos and sin tables once, over [pair, position] (the angle in
// f64 from the two indices; pow, cos and sin only there), and that the rotation reads them
// at (i floordiv 2, position), its pair partner at index i ^ 1 of the rotated dimension,
// and computes no transcendental of its own.
// CHECK-DAG: #[[$ROPE_TABLE:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 2, d0)>
// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[X:.*]]: tensor<4x2x6xf32>)
// CHECK: %[[TABLES:.*]]:2 = linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<3x4xf64>, tensor<3x4xf64>)
// CHECK: %[[PAIR:.*]] = linalg.index 0 : index
// CHECK: %[[TP:.*]] = linalg.index 1 : index
// CHECK: %[[F:.*]] = math.powf %{{.*}}, %{{.*}} : f64
// CHECK: %[[A:.*]] = arith.mulf %{{.*}}, %[[F]] : f64
// CHECK: %[[COS:.*]] = math.cos %[[A]] : f64
// CHECK: %[[SIN:.*]] = math.sin %[[A]] : f64
// CHECK: linalg.yield %[[COS]], %[[SIN]] : f64, f64
// CHECK: linalg.generic {indexing_maps = [#[[ID:map[0-9]*]], #[[$ROPE_TABLE]], #[[$ROPE_TABLE]], #[[ID]]]
// CHECK-SAME: ins(%[[X]], %[[TABLES]]#0, %[[TABLES]]#1 : tensor<4x2x6xf32>, tensor<3x4xf64>, tensor<3x4xf64>)
// CHECK: ^bb0(%[[OWN:.*]]: f32, %[[C:.*]]: f64, %[[S:.*]]: f64, %{{.*}}: f32):
// CHECK: %[[P:.*]] = linalg.index 0 : index
// CHECK: %[[I:.*]] = linalg.index 2 : index
// CHECK: %[[J:.*]] = arith.xori %[[I]], %{{.*}} : index
// CHECK: %[[PARTNER:.*]] = tensor.extract %[[X]][%[[P]], %{{.*}}, %[[J]]] : tensor<4x2x6xf32>
// CHECK: %[[NEG:.*]] = arith.negf %[[S]] : f64
// CHECK: %[[SIGNED:.*]] = arith.select %{{.*}}, %[[S]], %[[NEG]] : f64
// CHECK: %[[XO:.*]] = arith.extf %[[OWN]] : f32 to f64
// CHECK: %[[XP:.*]] = arith.extf %[[PARTNER]] : f32 to f64
// CHECK: %[[XC:.*]] = arith.mulf %[[XO]], %[[C]] : f64
// CHECK: %[[XS:.*]] = arith.mulf %[[XP]], %[[SIGNED]] : f64
// CHECK: %[[SUM:.*]] = arith.addf %[[XC]], %[[XS]] : f64
// CHECK: %[[R:.*]] = arith.truncf %[[SUM]] : f64 to f32
// CHECK-NOT: math.
// CHECK: linalg.yield %[[R]] : f32
// CHECK: arith.constant -1.000000e+00 : f64
func.func @rope(%x: !mt.tensor<[seq=4, heads=2, head_dim=6], f32>)
    -> (!mt.tensor<[seq=4, heads=2, head_dim=6], f32>, !mt.tensor<[seq=4, heads=2, head_dim=6], f32>) {
  %0 = mt.rope %x over head_dim position seq : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
  %1 = mt.rope %x over head_dim position seq inverse : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
  return %0, %1 : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>, !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
}

// -----

// Tests that rope at position ids (packed documents) keeps its tables over [pair, position]
// and reads them at (i floordiv 2, the element's id): the ids enter the rotation through
// their own dimensions' map, and the rotation computes no transcendental of its own.
// CHECK-DAG: #[[$ROPE_IDS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-LABEL: func.func @rope_ids
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x2x6xf32>, %[[IDS:.*]]: tensor<2x4xi32>)
// CHECK: %[[TABLES:.*]]:2 = linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<3x4xf64>, tensor<3x4xf64>)
// CHECK: linalg.generic {indexing_maps = [#{{map[0-9]*}}, #[[$ROPE_IDS]], #{{map[0-9]*}}]
// CHECK-SAME: ins(%[[X]], %[[IDS]] : tensor<2x4x2x6xf32>, tensor<2x4xi32>)
// CHECK: ^bb0(%{{.*}}: f32, %[[ID:.*]]: i32, %{{.*}}: f32):
// CHECK: %[[I:.*]] = linalg.index 3 : index
// CHECK: %[[IDX:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[PAIR:.*]] = arith.shrui %[[I]], %{{.*}} : index
// CHECK: tensor.extract %[[TABLES]]#0[%[[PAIR]], %[[IDX]]] : tensor<3x4xf64>
// CHECK: tensor.extract %[[TABLES]]#1[%[[PAIR]], %[[IDX]]] : tensor<3x4xf64>
// CHECK-NOT: math.
// CHECK: linalg.yield
func.func @rope_ids(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=6], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>)
    -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=6], f32> {
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=6], f32>
  return %0 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=6], f32>
}

// -----

// Tests that rope at position ids on a part of the sequence (sequence or context
// parallelism: the ids are split as the tokens are, so each holds its global position)
// covers the whole sequence's positions in its tables, with no offset.
// CHECK-LABEL: func.func @split_rope_ids
// CHECK-NOT: mtc_mesh_coordinate
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<3x8xf64>, tensor<3x8xf64>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<4x2x6xf32>, tensor<4xi32>)
func.func @split_rope_ids(%x: !mt.tensor<[seq=4, heads=2, head_dim=6], f32>, %ids: !mt.tensor<[seq=4], i32>)
    -> !mt.tensor<[seq=4, heads=2, head_dim=6], f32> {
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[seq=4], i32> {mtp.layout = !mtp.tensor<[seq=8, heads=2, head_dim=6], f32, <[cp = 2]>, split {seq = [cp]}>} : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
  return %0 : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
}

// -----

// Tests a rope of a part of the sequence (context parallelism): the position is the
// index offset by where this rank's part starts (its cp coordinate times the local
// sequence), in the tables' kernel, so each rank rotates by global positions; the rotated
// dimension is whole.
// CHECK-LABEL: func.func @split_rope
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[PART:.*]] = arith.addi %{{.*}}, %[[CI]] : index
// CHECK: %[[LOCAL:.*]] = arith.constant 4 : index
// CHECK: %[[START:.*]] = arith.muli %[[PART]], %[[LOCAL]] : index
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<3x4xf64>, tensor<3x4xf64>)
// CHECK: %[[P:.*]] = linalg.index 1 : index
// CHECK: %[[POS:.*]] = arith.addi %[[P]], %[[START]] : index
// CHECK: %[[POS64:.*]] = arith.index_castui %[[POS]] : index to i64
// CHECK: arith.uitofp %[[POS64]] : i64 to f64
// CHECK: math.cos
func.func @split_rope(%x: !mt.tensor<[seq=4, heads=2, head_dim=6], f32>)
    -> !mt.tensor<[seq=4, heads=2, head_dim=6], f32> {
  %0 = mt.rope %x over head_dim position seq {mtp.layout = !mtp.tensor<[seq=8, heads=2, head_dim=6], f32, <[cp = 2]>, split {seq = [cp]}>} : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
  return %0 : !mt.tensor<[seq=4, heads=2, head_dim=6], f32>
}

// -----

// Tests that dropout reads the five words of its site's key from mtc_dropout_key once, then
// decides each element with mtc_dropout_keep_element(seed, tensor id, index base + row-major
// offset, step, keep probability) and scales by 1/(1-rate), 0, or 1 when the key is inactive;
// and that rate 0 is the input itself.
// CHECK-DAG: func.func private @mtc_dropout_layer(i64)
// CHECK-DAG: func.func private @mtc_dropout_keep_element(i64, i32, i64, i32, f32) -> i32
// CHECK-DAG: func.func private @mtc_dropout_key(i64, i64) -> i64
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[STREAM:.*]] = arith.constant 7 : i64
// CHECK: %[[W0:.*]] = arith.constant 0 : i64
// CHECK: %[[SEED:.*]] = call @mtc_dropout_key(%[[STREAM]], %[[W0]]) : (i64, i64) -> i64
// CHECK: %[[W1:.*]] = arith.constant 1 : i64
// CHECK: %[[TID64:.*]] = call @mtc_dropout_key(%[[STREAM]], %[[W1]])
// CHECK: %[[TID:.*]] = arith.trunci %[[TID64]] : i64 to i32
// CHECK: %[[W2:.*]] = arith.constant 2 : i64
// CHECK: %[[STEP64:.*]] = call @mtc_dropout_key(%[[STREAM]], %[[W2]])
// CHECK: %[[STEP:.*]] = arith.trunci %[[STEP64]] : i64 to i32
// CHECK: %[[W3:.*]] = arith.constant 3 : i64
// CHECK: %[[BASE:.*]] = call @mtc_dropout_key(%[[STREAM]], %[[W3]])
// CHECK: %[[W4:.*]] = arith.constant 4 : i64
// CHECK: %[[ACTIVE64:.*]] = call @mtc_dropout_key(%[[STREAM]], %[[W4]])
// CHECK: %[[ACTIVE:.*]] = arith.cmpi ne, %[[ACTIVE64]], %{{.*}} : i64
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x3xf32>)
// CHECK: ^bb0(%[[V:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[ROWOFF:.*]] = arith.muli %[[ROW]], %[[C3]] : index
// CHECK: %[[OFF:.*]] = arith.addi %{{.*}}, %[[ROWOFF]] : index
// CHECK: %[[E:.*]] = arith.index_castui %[[OFF]] : index to i64
// CHECK: %[[INDEX:.*]] = arith.addi %[[BASE]], %[[E]] : i64
// CHECK: %[[KEEP:.*]] = arith.constant 0.899999976 : f32
// CHECK: %[[KEPT:.*]] = func.call @mtc_dropout_keep_element(%[[SEED]], %[[TID]], %[[INDEX]], %[[STEP]], %[[KEEP]]) : (i64, i32, i64, i32, f32) -> i32
// CHECK: %[[ISKEPT:.*]] = arith.cmpi ne, %[[KEPT]], %{{.*}} : i32
// CHECK: %[[INV:.*]] = arith.constant 1.11111116 : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[SCALE:.*]] = arith.select %[[ISKEPT]], %[[INV]], %[[ZERO]] : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[S:.*]] = arith.select %[[ACTIVE]], %[[SCALE]], %[[ONE]] : f32
// CHECK: %[[M:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK: linalg.yield %[[M]] : f32
// CHECK: return %[[R]], %[[X]] : tensor<2x3xf32>, tensor<2x3xf32>
func.func @dropout(%x: !mt.tensor<[a=2, b=3], f32>)
    -> (!mt.tensor<[a=2, b=3], f32>, !mt.tensor<[a=2, b=3], f32>) {
  %0 = mt.dropout %x rate 0.1 stream 7 : !mt.tensor<[a=2, b=3], f32>
  %1 = mt.dropout %x rate 0.0 stream 8 : !mt.tensor<[a=2, b=3], f32>
  return %0, %1 : !mt.tensor<[a=2, b=3], f32>, !mt.tensor<[a=2, b=3], f32>
}

// -----

// Tests that a symbol taking a collective's name with another meaning is an error.
// expected-error @+1 {{'func.func' op 'mtc_all_reduce' is reserved for the runtime's collectives: it must be an external function of type}}
func.func private @mtc_all_reduce(i64) -> i64
func.func @collective_clash(%x: !mt.tensor<[s=4], f32>) -> !mt.tensor<[s=4], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=4], f32> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  %r = mtp.all_reduce %p over ["tp"] : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %l = mtp.to_local %r : !mtp.tensor<[s=4], f32, <[tp = 2]>> -> !mt.tensor<[s=4], f32>
  return %l : !mt.tensor<[s=4], f32>
}

// -----

// Tests that a symbol taking mtc_dropout_key's name with another meaning is an error.
// expected-error @+1 {{'func.func' op 'mtc_dropout_key' is reserved for dropout: it must be an external function of type}}
func.func private @mtc_dropout_key(i64) -> f32
func.func @dropout_clash(%x: !mt.tensor<[a=2], f32>) -> !mt.tensor<[a=2], f32> {
  %0 = mt.dropout %x rate 0.1 stream 7 : !mt.tensor<[a=2], f32>
  return %0 : !mt.tensor<[a=2], f32>
}

// -----

// Tests that topk ranks each element by counting the elements above it (a reduction over a
// second copy of the ranked dimension), then picks the element of rank c for slot c, and
// that topk_grad adds each value gradient where its index equals the position.
// CHECK-DAG: #[[$I:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$J:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @topk
// CHECK-SAME: (%[[X:.*]]: tensor<3x5xf32>)
// CHECK: %[[RANK:.*]] = linalg.generic {indexing_maps = [#[[$I]], #[[$J]], #[[$I]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[X]] : tensor<3x5xf32>, tensor<3x5xf32>) outs(%{{.*}} : tensor<3x5xi64>)
// CHECK: ^bb0(%[[XI:.*]]: f32, %[[XJ:.*]]: f32, %[[ACC:.*]]: i64):
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[J:.*]] = linalg.index 2 : index
// CHECK: %[[JNAN:.*]] = arith.cmpf uno, %[[XJ]], %[[XJ]] : f32
// CHECK: %[[INAN:.*]] = arith.cmpf uno, %[[XI]], %[[XI]] : f32
// CHECK: %[[ONENAN:.*]] = arith.xori %[[JNAN]], %[[INAN]] : i1
// CHECK: %[[NE:.*]] = arith.cmpf one, %[[XJ]], %[[XI]] : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[XJ]], %[[XI]] : f32
// CHECK: %[[LOWER:.*]] = arith.cmpi ult, %[[J]], %[[I]] : index
// CHECK: %[[ORD:.*]] = arith.select %[[NE]], %[[GT]], %[[LOWER]] : i1
// CHECK: %[[ABOVE:.*]] = arith.select %[[ONENAN]], %[[JNAN]], %[[ORD]] : i1
// CHECK: %[[ONE:.*]] = arith.extui %[[ABOVE]] : i1 to i64
// CHECK: arith.addi %[[ACC]], %[[ONE]] : i64
// CHECK: %[[TOP:.*]]:2 = linalg.generic {indexing_maps = [#[[$J]], #[[$J]], #[[$I]], #[[$I]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[RANK]] : tensor<3x5xf32>, tensor<3x5xi64>) outs(%{{.*}}, %{{.*}} : tensor<3x2xf32>, tensor<3x2xi32>)
// CHECK: ^bb0(%[[V:.*]]: f32, %[[R:.*]]: i64, %[[VACC:.*]]: f32, %[[IACC:.*]]: i32):
// CHECK: %[[C:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK: %[[MATCH:.*]] = arith.cmpi eq, %[[R]], %[[C]] : i64
// CHECK: arith.select %[[MATCH]], %[[V]], %[[VACC]] : f32
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[$J]], #[[$J]], #[[$I]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[TOP]]#0, %[[TOP]]#1 : tensor<3x2xf32>, tensor<3x2xi32>)
// CHECK: ^bb0(%[[GV:.*]]: f32, %[[GI:.*]]: i32, %[[GACC:.*]]: f32):
// CHECK: %[[POS:.*]] = linalg.index 1 : index
// CHECK: %[[IDX:.*]] = arith.index_cast %[[GI]] : i32 to index
// CHECK: %[[EQ:.*]] = arith.cmpi eq, %[[IDX]], %[[POS]] : index
// CHECK: %[[SUM:.*]] = arith.addf %[[GACC]], %[[GV]] : f32
// CHECK: arith.select %[[EQ]], %[[SUM]], %[[GACC]] : f32
// CHECK: return %[[TOP]]#0, %[[TOP]]#1, %[[G]]
func.func @topk(%x: !mt.tensor<[tokens=3, experts=5], f32>)
    -> (!mt.tensor<[tokens=3, k=2], f32>, !mt.tensor<[tokens=3, k=2], i32>,
        !mt.tensor<[tokens=3, experts=5], f32>) {
  %v, %i = mt.topk %x over experts k k : !mt.tensor<[tokens=3, experts=5], f32>
      -> !mt.tensor<[tokens=3, k=2], f32>, !mt.tensor<[tokens=3, k=2], i32>
  %g = mt.topk_grad %v, %i over experts k k : !mt.tensor<[tokens=3, k=2], f32>,
      !mt.tensor<[tokens=3, k=2], i32> -> !mt.tensor<[tokens=3, experts=5], f32>
  return %v, %i, %g : !mt.tensor<[tokens=3, k=2], f32>, !mt.tensor<[tokens=3, k=2], i32>,
      !mt.tensor<[tokens=3, experts=5], f32>
}

// -----

// Tests that routing assigns slots in a loop over the choices (tokens, then k) carrying the
// per-expert counts, that dispatch copies each accepted token's row into its (expert, slot)
// row, and that combine is a reduction over k reading the expert buffer at the slot.
// CHECK-DAG: #[[$TK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$TH:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @dispatch_combine
// CHECK-SAME: (%[[X:.*]]: tensor<4x2xf32>, %[[I:.*]]: tensor<4x2xi32>, %[[W:.*]]: tensor<4x2xf32>)
// CHECK: %[[SLOTS:.*]]:2 = scf.for %[[T:.*]] = {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<2xi64>, tensor<4x2xi64>)
// CHECK: scf.for %[[C:.*]] = {{.*}} iter_args(%[[COUNTS:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}) -> (tensor<2xi64>, tensor<4x2xi64>)
// CHECK: %[[ID:.*]] = tensor.extract %[[I]][%[[T]], %[[C]]] : tensor<4x2xi32>
// CHECK: %[[E:.*]] = arith.minsi
// CHECK: %[[TAKEN:.*]] = tensor.extract %[[COUNTS]][%[[E]]] : tensor<2xi64>
// CHECK: %[[FREE:.*]] = arith.cmpi slt, %[[TAKEN]], %{{.*}} : i64
// CHECK: %[[SLOT:.*]] = arith.select %[[FREE]], %[[TAKEN]], %{{.*}} : i64
// CHECK: tensor.insert %{{.*}} into %[[COUNTS]][%[[E]]] : tensor<2xi64>
// CHECK: tensor.insert %[[SLOT]] into %[[S]][%[[T]], %[[C]]] : tensor<4x2xi64>
// CHECK: %[[D:.*]] = scf.for
// CHECK: scf.if
// CHECK: %[[ROW:.*]] = tensor.extract_slice %[[X]][%{{.*}}, 0] [1, 2] [1, 1] : tensor<4x2xf32> to tensor<2xf32>
// CHECK: tensor.insert_slice %[[ROW]] into %{{.*}}[%{{.*}}, %{{.*}}, 0] [1, 1, 2] [1, 1, 1] : tensor<2xf32> into tensor<2x2x2xf32>
// CHECK: } else {
// CHECK: %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[$TK]], #[[$TK]], #[[$TK]], #[[$TH]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[I]], %{{.*}}, %[[W]] : tensor<4x2xi32>, tensor<4x2xi64>, tensor<4x2xf32>)
// CHECK: ^bb0(%{{.*}}: i32, %[[SL:.*]]: i64, %[[WT:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[OK:.*]] = arith.cmpi sge, %[[SL]], %{{.*}} : i64
// CHECK: %[[V:.*]] = tensor.extract %[[D]][%{{.*}}, %{{.*}}, %{{.*}}] : tensor<2x2x2xf32>
// CHECK: %[[P:.*]] = arith.mulf %[[WT]], %[[V]] : f32
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK: arith.select %[[OK]], %[[SUM]], %[[ACC]] : f32
// CHECK: return %[[D]], %[[OUT]]
func.func @dispatch_combine(%x: !mt.tensor<[tokens=4, hidden=2], f32>,
                            %i: !mt.tensor<[tokens=4, k=2], i32>, %w: !mt.tensor<[tokens=4, k=2], f32>)
    -> (!mt.tensor<[experts=2, capacity=2, hidden=2], f32>, !mt.tensor<[tokens=4, hidden=2], f32>) {
  %d = mt.dispatch %x, %i k k to experts capacity capacity factor 0.5
      : !mt.tensor<[tokens=4, hidden=2], f32>, !mt.tensor<[tokens=4, k=2], i32>
      -> !mt.tensor<[experts=2, capacity=2, hidden=2], f32>
  %c = mt.combine %d, %i, %w k k from experts capacity capacity
      : !mt.tensor<[experts=2, capacity=2, hidden=2], f32>, !mt.tensor<[tokens=4, k=2], i32>,
        !mt.tensor<[tokens=4, k=2], f32> -> !mt.tensor<[tokens=4, hidden=2], f32>
  return %d, %c : !mt.tensor<[experts=2, capacity=2, hidden=2], f32>, !mt.tensor<[tokens=4, hidden=2], f32>
}

// -----

// Tests that the load-balancing loss counts each expert's choices, takes the softmax over
// the experts (max, then sum of exp) and sums f_e * p over tokens and experts.
// CHECK-LABEL: func.func @load_balancing
// CHECK: %[[COUNTS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]} ins(%{{.*}} : tensor<4x2xi32>) outs(%{{.*}} : tensor<3xf32>)
// CHECK: %[[F:.*]] = linalg.generic {{.*}} ins(%[[COUNTS]] : tensor<3xf32>)
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]}
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]}
// CHECK: math.exp
// CHECK: %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%{{.*}}, %[[MAX]], %[[SUM]], %[[F]] : tensor<4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%[[TOTAL]] : tensor<f32>)
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
func.func @load_balancing(%l: !mt.tensor<[tokens=4, experts=3], f32>, %i: !mt.tensor<[tokens=4, k=2], i32>)
    -> !mt.tensor<[], f32> {
  %0 = mt.load_balancing_loss %l, %i over experts k k
      : !mt.tensor<[tokens=4, experts=3], f32>, !mt.tensor<[tokens=4, k=2], i32> -> !mt.tensor<[], f32>
  return %0 : !mt.tensor<[], f32>
}

// -----

// Tests that expert_load counts every choice in i64: one generic over the experts reducing
// over the indices, adding one where the (clamped) index names the expert.
// CHECK-LABEL: func.func @expert_load
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : i64) outs(%{{.*}} : tensor<3xi64>)
// CHECK: %[[COUNTS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]} ins(%{{.*}} : tensor<4x2xi32>) outs(%[[ZERO]] : tensor<3xi64>)
// CHECK: arith.cmpi eq
// CHECK: arith.addi %{{.*}}, %{{.*}} : i64
// CHECK: arith.select
// CHECK: return %[[COUNTS]] : tensor<3xi64>
func.func @expert_load(%i: !mt.tensor<[tokens=4, k=2], i32>) -> !mt.tensor<[experts=3], i64> {
  %0 = mt.expert_load %i k k to experts : !mt.tensor<[tokens=4, k=2], i32> -> !mt.tensor<[experts=3], i64>
  return %0 : !mt.tensor<[experts=3], i64>
}

// -----

// Tests that repeat is an scf.for over the instances (descending with reverse) carrying the
// carried values and an accumulator per stacked result, slicing the stacked operands,
// calling the converted layer and inserting its stacked results.
// CHECK-LABEL: func.func @block
// CHECK-SAME: (%{{.*}}: tensor<3x4xf32>, %{{.*}}: tensor<4x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-LABEL: func.func @layers
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>, %[[W:.*]]: tensor<2x4x4xf32>)
// CHECK: %[[ACC0:.*]] = tensor.empty() : tensor<2x3x4xf32>
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[IV:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[H:.*]] = %[[X]], %[[ACC:.*]] = %[[ACC0]]) -> (tensor<3x4xf32>, tensor<2x3x4xf32>)
// CHECK: %[[LAST:.*]] = arith.constant 1 : index
// CHECK: %[[I:.*]] = arith.subi %[[LAST]], %[[IV]] : index
// CHECK: %[[WI:.*]] = tensor.extract_slice %[[W]][%[[I]], 0, 0] [1, 4, 4] [1, 1, 1] : tensor<2x4x4xf32> to tensor<4x4xf32>
// CHECK: %[[R:.*]]:2 = func.call @block(%[[H]], %[[WI]]) : (tensor<3x4xf32>, tensor<4x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: %[[NEW:.*]] = tensor.insert_slice %[[R]]#1 into %[[ACC]][%[[I]], 0, 0] [1, 3, 4] [1, 1, 1] : tensor<3x4xf32> into tensor<2x3x4xf32>
// CHECK: scf.yield %[[R]]#0, %[[NEW]] : tensor<3x4xf32>, tensor<2x3x4xf32>
// CHECK: return %[[LOOP]]#0, %[[LOOP]]#1 : tensor<3x4xf32>, tensor<2x3x4xf32>
func.func @block(%x: !mt.tensor<[seq=3, hidden=4], f32>, %w: !mt.tensor<[hidden=4, ffn=4], f32>)
    -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[seq=3, ffn=4], f32>) attributes {mt.layer} {
  %h = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=3, hidden=4], f32>,
      !mt.tensor<[hidden=4, ffn=4], f32> -> !mt.tensor<[seq=3, ffn=4], f32>
  %r = mt.rename %h ffn to hidden : !mt.tensor<[seq=3, ffn=4], f32> -> !mt.tensor<[seq=3, hidden=4], f32>
  return %r, %h : !mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[seq=3, ffn=4], f32>
}
func.func @layers(%x: !mt.tensor<[seq=3, hidden=4], f32>, %w: !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
    -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>) {
  %y, %hs = mt.repeat @block(%x, %w) count 2 {carried = 1 : i64, reverse}
      : (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
      -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>)
  return %y, %hs : !mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>
}

// -----

// Tests that a repeat's invariant operand (position ids) reaches every call whole, after
// the carried value: neither an iter_arg nor sliced.
// CHECK-LABEL: func.func @invariant_layers
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>, %[[IDS:.*]]: tensor<3xi32>)
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[H:.*]] = %[[X]]) -> (tensor<3x4xf32>)
// CHECK-NOT: tensor.extract_slice
// CHECK: func.call @ids_block(%[[H]], %[[IDS]]) : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
func.func @ids_block(%x: !mt.tensor<[seq=3, hidden=4], f32>, %ids: !mt.tensor<[seq=3], i32>) -> !mt.tensor<[seq=3, hidden=4], f32>
    attributes {mt.layer} {
  %y = mt.rope %x over hidden position seq at %ids : !mt.tensor<[seq=3], i32> : !mt.tensor<[seq=3, hidden=4], f32>
  return %y : !mt.tensor<[seq=3, hidden=4], f32>
}
func.func @invariant_layers(%x: !mt.tensor<[seq=3, hidden=4], f32>, %ids: !mt.tensor<[seq=3], i32>) -> !mt.tensor<[seq=3, hidden=4], f32> {
  %y = mt.repeat @ids_block(%x, %ids) count 2 {carried = 1 : i64, invariant = 1 : i64}
      : (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[seq=3], i32>) -> !mt.tensor<[seq=3, hidden=4], f32>
  return %y : !mt.tensor<[seq=3, hidden=4], f32>
}

// -----

// Tests that a pipeline chunk's repeat (`mt.first_instance`, mt-pipeline-chunks) tells the
// runtime the global layer instance first + i of each call, so that its dropout masks are
// those of the whole layer stack's calls.
// CHECK-LABEL: func.func @chunk_layers
// CHECK: scf.for %[[IV:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: %[[I:.*]] = arith.index_castui %[[IV]] : index to i64
// CHECK: %[[FIRST:.*]] = arith.constant 3 : i64
// CHECK: %[[LAYER:.*]] = arith.addi %[[I]], %[[FIRST]] : i64
// CHECK: func.call @mtc_dropout_layer(%[[LAYER]]) : (i64) -> ()
// CHECK: func.call @dropout_block(
func.func @dropout_block(%x: !mt.tensor<[seq=3, hidden=4], f32>) -> !mt.tensor<[seq=3, hidden=4], f32>
    attributes {mt.layer} {
  %y = mt.dropout %x rate 1.000000e-01 stream 0 : !mt.tensor<[seq=3, hidden=4], f32>
  return %y : !mt.tensor<[seq=3, hidden=4], f32>
}
func.func @chunk_layers(%x: !mt.tensor<[seq=3, hidden=4], f32>) -> !mt.tensor<[seq=3, hidden=4], f32> {
  %y = mt.repeat @dropout_block(%x) count 2 {mt.first_instance = 3 : i64}
      : (!mt.tensor<[seq=3, hidden=4], f32>) -> !mt.tensor<[seq=3, hidden=4], f32>
  return %y : !mt.tensor<[seq=3, hidden=4], f32>
}

// -----

// Tests that an op outside the supported set is reported by name and nothing is lowered.
func.func @unsupported(%x: !mt.tensor<[seq=4, hidden=8], f32>) -> !mt.tensor<[seq=4, hidden=8], f32> {
  %0 = mt.exp %x : !mt.tensor<[seq=4, hidden=8], f32>
  // expected-error @+1 {{'mt.softmax' op cannot be lowered to linalg}}
  %1 = mt.softmax %0 over hidden : !mt.tensor<[seq=4, hidden=8], f32>
  return %1 : !mt.tensor<[seq=4, hidden=8], f32>
}

// -----

// Tests the collectives of a partitioned step: each is one call of the runtime on the
// operand's buffer and a fresh result buffer (addresses as i64, the axis's position in the
// mesh, the dtype code, the element count); a gather along an inner dimension moves it to
// the front first (the runtime's blocks are contiguous) and back after; the local views
// are nothing.
// CHECK-DAG: func.func private @mtc_all_reduce(i64, i64, i64, i64, i64, i64)
// CHECK-DAG: func.func private @mtc_all_gather(i64, i64, i64, i64, i64)
// CHECK-DAG: func.func private @mtc_mesh_coordinate(i64) -> i64
// CHECK-LABEL: func.func @collectives
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<4x3xf32> to memref<4x3xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK: %[[DP:.*]] = arith.constant 0 : i64
// CHECK: %[[N:.*]] = arith.constant 12 : i64
// CHECK: call @mtc_all_reduce(%[[DP]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]])
// CHECK: %[[SUM:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[SUM]] : tensor<4x3xf32>) {{.*}} permutation = [1, 0]
// CHECK: bufferization.to_buffer %[[T]] read_only : tensor<3x4xf32> to memref<3x4xf32>
// CHECK: memref.alloc() : memref<6x4xf32>
// CHECK: %[[TP:.*]] = arith.constant 1 : i64
// CHECK: call @mtc_all_gather(%[[TP]],
// CHECK: linalg.transpose {{.*}} permutation = [1, 0]
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[OFF:.*]] = arith.muli %[[CI]], %{{.*}} : index
// CHECK: tensor.extract_slice %{{.*}}[%[[OFF]], 0] [2, 6] [1, 1] : tensor<4x6xf32> to tensor<2x6xf32>
func.func @collectives(%x: !mt.tensor<[s=4, h=3], f32>) -> !mt.tensor<[s=2, h=3], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=4, h=3], f32> -> !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {h = [tp]}, partial [dp]>
  %r = mtp.all_reduce %p over ["dp"] : !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {h = [tp]}, partial [dp]> -> !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {h = [tp]}>
  %g = mtp.all_gather %r over "tp" along "h" : !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {h = [tp]}> -> !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>>
  %s = mtp.all_slice %g over "dp" along "s" : !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>> -> !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {s = [dp]}>
  %l = mtp.to_local %s : !mtp.tensor<[s=4, h=6], f32, <[dp = 2, tp = 2]>, split {s = [dp]}> -> !mt.tensor<[s=2, h=6], f32>
  %h = mt.reduce_sum %l over [h] : <[s=2, h=6], f32> -> <[s=2], f32>
  %b = mt.broadcast %h : <[s=2], f32> to <[s=2, h=3], f32>
  return %b : !mt.tensor<[s=2, h=3], f32>
}

// -----

// Tests an all-to-all moving tp (the mesh's second axis, 4 ranks) from s to h: the
// operand's h is split into (destination coordinate, part) and transposed to [coordinate,
// s, b, part], so block c (3 x 5 x 2 = 30 elements) is what coordinate c gets; what arrives
// is [source, s, b, part], whose first two dimensions collapse into the whole s (source c's
// rows at c * 5), transposed back to [b, s, h].
// CHECK-DAG: func.func private @mtc_all_to_all(i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @all_to_all
// CHECK-SAME: (%[[X:.*]]: tensor<3x5x8xf32>) -> tensor<3x20x2xf32>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1], [2, 3]] output_shape [3, 5, 4, 2] : tensor<3x5x8xf32> into tensor<3x5x4x2xf32>
// CHECK: %[[BLOCKS:.*]] = linalg.transpose ins(%[[E]] : tensor<3x5x4x2xf32>) outs(%{{.*}} : tensor<4x5x3x2xf32>) permutation = [2, 1, 0, 3]
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[BLOCKS]] read_only : tensor<4x5x3x2xf32> to memref<4x5x3x2xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x5x3x2xf32>
// CHECK: %[[TP:.*]] = arith.constant 1 : i64
// CHECK: %[[F32:.*]] = arith.constant 0 : i64
// CHECK: %[[COUNT:.*]] = arith.constant 30 : i64
// CHECK: call @mtc_all_to_all(%[[TP]], %[[F32]], %{{.*}}, %{{.*}}, %[[COUNT]]) : (i64, i64, i64, i64, i64) -> ()
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<4x5x3x2xf32> to tensor<4x5x3x2xf32>
// CHECK: %[[S:.*]] = tensor.collapse_shape %[[R]] {{\[}}[0, 1], [2], [3]] : tensor<4x5x3x2xf32> into tensor<20x3x2xf32>
// CHECK: %[[Y:.*]] = linalg.transpose ins(%[[S]] : tensor<20x3x2xf32>) outs(%{{.*}} : tensor<3x20x2xf32>) permutation = [1, 0, 2]
// CHECK: return %[[Y]] : tensor<3x20x2xf32>
func.func @all_to_all(%x: !mt.tensor<[b=3, s=5, h=8], f32>) -> !mt.tensor<[b=3, s=20, h=2], f32> {
  %p = mtp.from_local %x : !mt.tensor<[b=3, s=5, h=8], f32> -> !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {s = [tp]}>
  %a = mtp.all_to_all %p over "tp" from "s" to "h" : !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {s = [tp]}> -> !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {h = [tp]}>
  %l = mtp.to_local %a : !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {h = [tp]}> -> !mt.tensor<[b=3, s=20, h=2], f32>
  return %l : !mt.tensor<[b=3, s=20, h=2], f32>
}

// -----

// Tests a ring shift over cp (the mesh's second axis): the whole local buffer goes to the
// runtime's mtc_shift with the axis, the dtype, the offset and rotate, and comes back in a
// fresh buffer of the same shape.
// CHECK-DAG: func.func private @mtc_shift(i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @shift
// CHECK-SAME: (%[[X:.*]]: tensor<5x3xf32>) -> tensor<5x3xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<5x3xf32> to memref<5x3xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<5x3xf32>
// CHECK: %[[CP:.*]] = arith.constant 1 : i64
// CHECK: %[[F32:.*]] = arith.constant 0 : i64
// CHECK: %[[OFFSET:.*]] = arith.constant 1 : i64
// CHECK: %[[ROTATE:.*]] = arith.constant 1 : i64
// CHECK: %[[COUNT:.*]] = arith.constant 15 : i64
// CHECK: call @mtc_shift(%[[CP]], %[[F32]], %[[OFFSET]], %[[ROTATE]], %{{.*}}, %{{.*}}, %[[COUNT]]) : (i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<5x3xf32> to tensor<5x3xf32>
// CHECK: return %[[R]] : tensor<5x3xf32>
func.func @shift(%x: !mt.tensor<[s=5, h=3], f32>) -> !mt.tensor<[s=5, h=3], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=5, h=3], f32> -> !mtp.tensor<[s=10, h=3], f32, <[tp = 2, cp = 2]>, split {s = [cp]}>
  %y = mtp.shift %p over "cp" offset 1 rotate : !mtp.tensor<[s=10, h=3], f32, <[tp = 2, cp = 2]>, split {s = [cp]}>
  %l = mtp.to_local %y : !mtp.tensor<[s=10, h=3], f32, <[tp = 2, cp = 2]>, split {s = [cp]}> -> !mt.tensor<[s=5, h=3], f32>
  return %l : !mt.tensor<[s=5, h=3], f32>
}

// -----

// Tests positions of a rank's part of a split sequence (ring attention's): the iota starts
// at this rank's coordinate along cp times the local size.
// CHECK-LABEL: func.func @split_iota
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[START:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[G:.*]] = arith.addi %[[I]], %[[START]] : index
// CHECK: arith.index_cast %[[G]] : index to i64
func.func @split_iota() -> !mt.tensor<[seq=4], f32> {
  %0 = mt.iota dim seq {mtp.layout = !mtp.tensor<[seq=8], f32, <[cp = 2]>, split {seq = [cp]}>} : !mt.tensor<[seq=4], f32>
  return %0 : !mt.tensor<[seq=4], f32>
}

// -----

// Tests the all-to-all of expert slots with filled counts, both ways over ep 2 (4 experts,
// 6 slots per rank, 3 features): there the blocks are [destination, slot, expert of its
// part, feature] (a = 3 slots, b = 2 experts), back [destination, expert, slot of its part,
// feature] (a = 2 experts, b = 3 slots); each call gets the counts' buffer, a scratch buffer
// of the blocks' size and the row of 3 features.
// CHECK-DAG: func.func private @mtc_all_to_all_filled(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @all_to_all_filled
// CHECK-SAME: (%[[X:.*]]: tensor<4x3x3xf32>, %[[N:.*]]: tensor<4xi64>)
// CHECK: %[[BLOCKS:.*]] = linalg.transpose {{.*}} outs(%{{.*}} : tensor<2x3x2x3xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[BLOCKS]] read_only : tensor<2x3x2x3xf32> to memref<2x3x2x3xf32>
// CHECK: %[[COUNTS:.*]] = bufferization.to_buffer %[[N]] read_only : tensor<4xi64> to memref<4xi64>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x3x2x3xf32>
// CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<2x3x2x3xf32>
// CHECK: call @mtc_all_to_all_filled(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c2_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}) : (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK: linalg.transpose {{.*}} outs(%{{.*}} : tensor<2x2x3x3xf32>) permutation = [1, 0, 2, 3]
// CHECK: call @mtc_all_to_all_filled(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64{{(_[0-9]+)?}}, %c2_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}})
// CHECK: return %{{.*}} : tensor<4x3x3xf32>
func.func @all_to_all_filled(%x: !mt.tensor<[experts=4, capacity=3, hidden=3], f32>, %n: !mt.tensor<[experts=4], i64>) -> !mt.tensor<[experts=4, capacity=3, hidden=3], f32> {
  %p = mtp.from_local %x : !mt.tensor<[experts=4, capacity=3, hidden=3], f32> -> !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=4], i64>) : !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {experts = [ep]}>
  %b = mtp.all_to_all %a over "ep" from "experts" to "capacity" filled(%n : !mt.tensor<[experts=4], i64>) : !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {experts = [ep]}> -> !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {capacity = [ep]}>
  %l = mtp.to_local %b : !mtp.tensor<[experts=4, capacity=6, hidden=3], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mt.tensor<[experts=4, capacity=3, hidden=3], f32>
  return %l : !mt.tensor<[experts=4, capacity=3, hidden=3], f32>
}

// -----

// Tests a dropout of a split tensor: its elements are numbered as in the whole tensor, the
// split dimension's index offset by this rank's coordinate times the local size, the
// strides those of the whole tensor.
// CHECK-LABEL: func.func @split_dropout
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: linalg.generic
// CHECK: %[[I1:.*]] = linalg.index 1 : index
// CHECK: arith.addi %[[I1]], %{{.*}} : index
// CHECK: %[[I0:.*]] = linalg.index 0 : index
// CHECK: arith.constant 8 : index
// CHECK: func.call @mtc_dropout_keep_element
func.func @split_dropout(%x: !mt.tensor<[a=2, b=4], f32>) -> !mt.tensor<[a=2, b=4], f32> {
  %y = mt.dropout %x rate 1.000000e-01 stream 0 {mtp.layout = !mtp.tensor<[a=2, b=8], f32, <[tp = 2]>, split {b = [tp]}>} : <[a=2, b=4], f32>
  return %y : !mt.tensor<[a=2, b=4], f32>
}

// -----

// Tests the lookup and the scatter of a table split along the indexed dimension: the
// index is shifted by this rank's first row (coordinate times the local rows), a row
// outside the part reads 0 and updates nothing; a max all-reduce passes reduction 1.
// CHECK-LABEL: func.func @vocab_parallel
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK: %[[LO:.*]] = arith.cmpi sge, %[[ROW]]
// CHECK: %[[HI:.*]] = arith.cmpi slt, %[[ROW]]
// CHECK: %[[IN:.*]] = arith.andi %[[LO]], %[[HI]] : i1
// CHECK: %[[V:.*]] = tensor.extract
// CHECK: arith.select %[[IN]], %[[V]], %{{.*}} : f32
// CHECK: call @mtc_mesh_coordinate
// CHECK: scf.for
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: %[[MAX:.*]] = arith.constant 1 : i64
// CHECK: call @mtc_all_reduce(%{{.*}}, %{{.*}}, %[[MAX]],
func.func @vocab_parallel(%table: !mt.tensor<[vocab=4, hidden=2], f32>, %ids: !mt.tensor<[seq=3], i32>,
                          %g: !mt.tensor<[seq=3, hidden=2], f32>)
    -> (!mt.tensor<[seq=3, hidden=2], f32>, !mt.tensor<[vocab=4, hidden=2], f32>, !mt.tensor<[seq=3], f32>) {
  %x = mt.gather %table, %ids over vocab {mtp.layout = !mtp.tensor<[vocab=8, hidden=2], f32, <[tp = 2]>, split {vocab = [tp]}>} : <[vocab=4, hidden=2], f32>, <[seq=3], i32> -> <[seq=3, hidden=2], f32>
  %d = mt.embedding_grad %ids, %g over vocab {mtp.layout = !mtp.tensor<[vocab=8, hidden=2], f32, <[tp = 2]>, split {vocab = [tp]}>} : <[seq=3], i32>, <[seq=3, hidden=2], f32> -> <[vocab=4, hidden=2], f32>
  %m = mt.reduce_max %x over [hidden] : <[seq=3, hidden=2], f32> -> <[seq=3], f32>
  %p = mtp.from_local %m : !mt.tensor<[seq=3], f32> -> !mtp.tensor<[seq=3], f32, <[tp = 2]>, partial [tp]>
  %r = mtp.all_reduce %p over ["tp"] reduction = max : !mtp.tensor<[seq=3], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[seq=3], f32, <[tp = 2]>>
  %l = mtp.to_local %r : !mtp.tensor<[seq=3], f32, <[tp = 2]>> -> !mt.tensor<[seq=3], f32>
  return %x, %d, %l : !mt.tensor<[seq=3, hidden=2], f32>, !mt.tensor<[vocab=4, hidden=2], f32>, !mt.tensor<[seq=3], f32>
}

// -----

// Tests that a min all-reduce, which the runtime's mtc_all_reduce does not take, is an
// error naming the reduction rather than a call the runtime refuses.
func.func @min_all_reduce(%x: !mt.tensor<[s=4], f32>) -> !mt.tensor<[s=4], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=4], f32> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  // expected-error @+2 {{'mtp.all_reduce' op reduction = min: the runtime's mtc_all_reduce sums or takes the maximum only}}
  // expected-error @+1 {{failed to legalize operation 'mtp.all_reduce'}}
  %r = mtp.all_reduce %p over ["tp"] reduction = min : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %l = mtp.to_local %r : !mtp.tensor<[s=4], f32, <[tp = 2]>> -> !mt.tensor<[s=4], f32>
  return %l : !mt.tensor<[s=4], f32>
}

// -----

// Tests that a reduce-scatter other than a sum (mtc_reduce_scatter sums) is an error.
func.func @max_reduce_scatter(%x: !mt.tensor<[s=4], f32>) -> !mt.tensor<[s=2], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=4], f32> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  // expected-error @+2 {{'mtp.reduce_scatter' op reduction = max: the runtime's mtc_reduce_scatter sums only}}
  // expected-error @+1 {{failed to legalize operation 'mtp.reduce_scatter'}}
  %r = mtp.reduce_scatter %p over "tp" along "s" reduction = max : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  %l = mtp.to_local %r : !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}> -> !mt.tensor<[s=2], f32>
  return %l : !mt.tensor<[s=2], f32>
}

// -----

// Tests to_partial: the value where this rank's coordinate is 0, zero elsewhere.
// CHECK-LABEL: func.func @to_partial
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[CI]], %{{.*}} : index
// CHECK: linalg.generic
// CHECK: arith.select %[[FIRST]], %{{.*}}, %{{.*}} : f32
func.func @to_partial(%x: !mt.tensor<[s=4], f32>) -> !mt.tensor<[s=4], f32> {
  %w = mtp.from_local %x : !mt.tensor<[s=4], f32> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %p = mtp.to_partial %w over "tp" : !mtp.tensor<[s=4], f32, <[tp = 2]>> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  %l = mtp.to_local %p : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mt.tensor<[s=4], f32>
  return %l : !mt.tensor<[s=4], f32>
}

// -----

// Tests that integer tensors (routing indices, token ids) are communicated with their own
// dtype codes: i32 is MTC_I32 (4), i64 is MTC_I64 (5).
// CHECK-LABEL: func.func @integer_collectives
// CHECK: %[[I32:.*]] = arith.constant 4 : i64
// CHECK: call @mtc_all_gather(%{{.*}}, %[[I32]],
// CHECK: %[[I64:.*]] = arith.constant 5 : i64
// CHECK: call @mtc_all_reduce(%{{.*}}, %[[I64]],
func.func @integer_collectives(%x: !mt.tensor<[s=2], i32>, %y: !mt.tensor<[s=2], i64>) -> (!mt.tensor<[s=4], i32>, !mt.tensor<[s=2], i64>) {
  %p = mtp.from_local %x : !mt.tensor<[s=2], i32> -> !mtp.tensor<[s=4], i32, <[tp = 2]>, split {s = [tp]}>
  %g = mtp.all_gather %p over "tp" along "s" : !mtp.tensor<[s=4], i32, <[tp = 2]>, split {s = [tp]}> -> !mtp.tensor<[s=4], i32, <[tp = 2]>>
  %l = mtp.to_local %g : !mtp.tensor<[s=4], i32, <[tp = 2]>> -> !mt.tensor<[s=4], i32>
  %q = mtp.from_local %y : !mt.tensor<[s=2], i64> -> !mtp.tensor<[s=2], i64, <[tp = 2]>, partial [tp]>
  %r = mtp.all_reduce %q over ["tp"] : !mtp.tensor<[s=2], i64, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=2], i64, <[tp = 2]>>
  %m = mtp.to_local %r : !mtp.tensor<[s=2], i64, <[tp = 2]>> -> !mt.tensor<[s=2], i64>
  return %l, %m : !mt.tensor<[s=4], i32>, !mt.tensor<[s=2], i64>
}

// -----

// Tests positions of a rank's part of a sequence split by a two_chunk axis (cp 2: 4 chunks
// of 2 positions, coordinate c holding chunks c and 3 - c): local index i < 2 is at 2c + i,
// the others at (3 - c) 2 + i - 2 = (2 - c) 2 + i.
// CHECK-LABEL: func.func @two_chunk_iota
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[LOW:.*]] = arith.muli %[[CI]], %[[TWO:.*]] : index
// CHECK: %[[MIRROR:.*]] = arith.subi %{{.*}}, %[[CI]] : index
// CHECK: %[[HIGH:.*]] = arith.muli %[[MIRROR]], %{{.*}} : index
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[A:.*]] = arith.addi %[[I]], %[[LOW]] : index
// CHECK: %[[B:.*]] = arith.addi %[[I]], %[[HIGH]] : index
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[I]], %{{.*}} : index
// CHECK: %[[G:.*]] = arith.select %[[FIRST]], %[[A]], %[[B]] : index
// CHECK: arith.index_cast %[[G]] : index to i64
func.func @two_chunk_iota() -> !mt.tensor<[seq=4], f32> {
  %0 = mt.iota dim seq {mtp.layout = !mtp.tensor<[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>} : !mt.tensor<[seq=4], f32>
  return %0 : !mt.tensor<[seq=4], f32>
}

// -----

// Tests the collectives along a sequence split by a two_chunk axis (cp 2, 4 chunks of 2
// rows): all_slice takes chunks c and 3 - c side by side; the all-gather's blocks arrive as
// chunks 0, 3, 1, 2 and are put back in order (result chunk j from gathered chunk 0, 2, 3,
// 1); the reduce-scatter's operand is put in block order first (chunks 0, 3, 1, 2).
// CHECK-LABEL: func.func @two_chunk_collectives
// CHECK: %[[C:.*]] = call @mtc_mesh_coordinate(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[MIRROR:.*]] = arith.subi %{{.*}}, %[[CI]] : index
// CHECK: %[[LOW:.*]] = arith.muli %[[CI]], %{{.*}} : index
// CHECK: %[[A:.*]] = tensor.extract_slice %{{.*}}[%[[LOW]], 0] [2, 3] [1, 1] : tensor<8x3xf32> to tensor<2x3xf32>
// CHECK: %[[S0:.*]] = tensor.insert_slice %[[A]] into %{{.*}}[0, 0] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<4x3xf32>
// CHECK: %[[HIGH:.*]] = arith.muli %[[MIRROR]], %{{.*}} : index
// CHECK: %[[B:.*]] = tensor.extract_slice %{{.*}}[%[[HIGH]], 0] [2, 3] [1, 1] : tensor<8x3xf32> to tensor<2x3xf32>
// CHECK: tensor.insert_slice %[[B]] into %[[S0]][2, 0] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<4x3xf32>
// CHECK: call @mtc_all_gather(
// CHECK: %[[G:.*]] = bufferization.to_tensor
// CHECK: tensor.extract_slice %[[G]][0, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[0, 0] [2, 3]
// CHECK: tensor.extract_slice %[[G]][4, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[2, 0] [2, 3]
// CHECK: tensor.extract_slice %[[G]][6, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[4, 0] [2, 3]
// CHECK: tensor.extract_slice %[[G]][2, 0] [2, 3]
// CHECK: %[[W:.*]] = tensor.insert_slice {{.*}}[6, 0] [2, 3]
// CHECK: tensor.extract_slice %[[W]][0, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[0, 0] [2, 3]
// CHECK: tensor.extract_slice %[[W]][6, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[2, 0] [2, 3]
// CHECK: tensor.extract_slice %[[W]][2, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[4, 0] [2, 3]
// CHECK: tensor.extract_slice %[[W]][4, 0] [2, 3]
// CHECK: tensor.insert_slice {{.*}}[6, 0] [2, 3]
// CHECK: call @mtc_reduce_scatter(
func.func @two_chunk_collectives(%x: !mt.tensor<[s=8, h=3], f32>) -> !mt.tensor<[s=4, h=3], f32> {
  %w = mtp.from_local %x : !mt.tensor<[s=8, h=3], f32> -> !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>>
  %s = mtp.all_slice %w over "cp" along "s" : !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>> -> !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, split {s = [cp]}>
  %g = mtp.all_gather %s over "cp" along "s" : !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, split {s = [cp]}> -> !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>>
  %l = mtp.to_local %g : !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>> -> !mt.tensor<[s=8, h=3], f32>
  %p = mtp.from_local %l : !mt.tensor<[s=8, h=3], f32> -> !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, partial [cp]>
  %r = mtp.reduce_scatter %p over "cp" along "s" : !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, partial [cp]> -> !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, split {s = [cp]}>
  %o = mtp.to_local %r : !mtp.tensor<[s=8, h=3], f32, <[cp = 2 two_chunk]>, split {s = [cp]}> -> !mt.tensor<[s=4, h=3], f32>
  return %o : !mt.tensor<[s=4, h=3], f32>
}

// -----

// Tests that a lookup in a table split by a two_chunk axis along the indexed dimension is
// an error: the rank's rows are two ranges, not one.
func.func @two_chunk_gather(%table: !mt.tensor<[vocab=4, hidden=2], f32>, %ids: !mt.tensor<[seq=3], i32>) -> !mt.tensor<[seq=3, hidden=2], f32> {
  // expected-error @+2 {{'mt.gather' op on a table whose 'vocab' is split in two chunks per rank (a two_chunk axis): not supported, its rows are not one range}}
  // expected-error @+1 {{failed to legalize operation 'mt.gather'}}
  %x = mt.gather %table, %ids over vocab {mtp.layout = !mtp.tensor<[vocab=8, hidden=2], f32, <[cp = 2 two_chunk]>, split {vocab = [cp]}>} : <[vocab=4, hidden=2], f32>, <[seq=3], i32> -> <[seq=3, hidden=2], f32>
  return %x : !mt.tensor<[seq=3, hidden=2], f32>
}

// -----

// Tests that an all-to-all over a two_chunk axis is an error: its blocks would have to be
// chunk pairs.
func.func @two_chunk_all_to_all(%x: !mt.tensor<[s=4, h=8], f32>) -> !mt.tensor<[s=8, h=4], f32> {
  %p = mtp.from_local %x : !mt.tensor<[s=4, h=8], f32> -> !mtp.tensor<[s=8, h=8], f32, <[cp = 2 two_chunk]>, split {s = [cp]}>
  // expected-error @+2 {{'mtp.all_to_all' op over the two_chunk axis 'cp': an all-to-all of chunked parts is not supported}}
  // expected-error @+1 {{failed to legalize operation 'mtp.all_to_all'}}
  %a = mtp.all_to_all %p over "cp" from "s" to "h" : !mtp.tensor<[s=8, h=8], f32, <[cp = 2 two_chunk]>, split {s = [cp]}> -> !mtp.tensor<[s=8, h=8], f32, <[cp = 2 two_chunk]>, split {h = [cp]}>
  %l = mtp.to_local %a : !mtp.tensor<[s=8, h=8], f32, <[cp = 2 two_chunk]>, split {h = [cp]}> -> !mt.tensor<[s=8, h=4], f32>
  return %l : !mt.tensor<[s=8, h=4], f32>
}

// RUN: mt-opt %s -split-input-file -mt-to-linalg -verify-diagnostics | FileCheck %s

// Tests that fused causal grouped-query attention becomes FlashAttention-2's forward: the
// operands in rows ([batch x kv heads, positions x group, head_dim]), an scf.for over the
// query blocks around an scf.for over the key blocks up to the diagonal, each step one
// batched product for the scores, the masked and scaled scores, the running maximum, the
// probabilities, the rescaled sum and the product with the values accumulating into the
// rescaled output; then output / sum and the log-sum-exp, written into the block's rows.
module attributes {mt.fused_attention = 16 : i64} {
// CHECK-LABEL: func.func @forward
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3], [4]] output_shape [2, 32, 2, 2, 8]
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2, 3], [4]] : tensor<2x2x32x2x8xf32> into tensor<4x64x8xf32>
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[C2]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<4x64x8xf32>, tensor<4x64xf32>)
// CHECK: tensor.extract_slice %{{.*}} [4, 32, 8] [1, 1, 1] : tensor<4x64x8xf32> to tensor<4x32x8xf32>
// CHECK: %[[END:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]] step %{{.*}} iter_args
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<4x32x8xf32>, tensor<4x8x16xf32>) outs(%{{.*}} : tensor<4x32x16xf32>)
// CHECK: arith.divui
// CHECK: arith.cmpi ugt
// CHECK: arith.select
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<4x32x16xf32>, tensor<4x16x8xf32>)
// CHECK: scf.yield
// CHECK: arith.divf
// CHECK: math.log
// CHECK: tensor.insert_slice
// CHECK: scf.yield
// CHECK-NOT: mt.attention
func.func @forward(%q: !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>,
                   %k: !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>,
                   %v: !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>)
    -> (!mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4], f32>) {
  %o, %lse = mt.attention %q, %k, %v dims(seq, heads, kv, head_dim) causal scale 0.25 save_lse : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>
  return %o, %lse : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4], f32>
}
}

// -----

// Tests that the fused backward takes the saved output and log-sum-exp, computes the row
// dots once, and loops over the key blocks around the query blocks from the diagonal on
// (causal), with five batched products per block pair.
module attributes {mt.fused_attention = 8 : i64} {
// CHECK-LABEL: func.func @backward
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>)
// CHECK: scf.for %{{.*}} = %[[J]] to
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x8x4xf32>, tensor<2x4x8xf32>)
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: scf.yield
// CHECK: scf.yield
// CHECK-NOT: mt.attention_grad
func.func @backward(%q: !mt.tensor<[seq=16, heads=2, head_dim=4], f32>,
                    %do: !mt.tensor<[seq=16, heads=2, head_dim=4], f32>,
                    %o: !mt.tensor<[seq=16, heads=2, head_dim=4], f32>,
                    %lse: !mt.tensor<[seq=16, heads=2], f32>)
    -> !mt.tensor<[seq=16, heads=2, head_dim=4], f32> {
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %do saved(%o, %lse : !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2], f32>) dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2, head_dim=4], f32>, !mt.tensor<[seq=16, heads=2, head_dim=4], f32>
  return %dq : !mt.tensor<[seq=16, heads=2, head_dim=4], f32>
}
}

// -----

// Tests that a fused attention in a type the loops do not compute in is reported.
module attributes {mt.fused_attention = 8 : i64} {
func.func @bf16(%q: !mt.tensor<[seq=16, heads=2, head_dim=4], bf16>)
    -> !mt.tensor<[seq=16, heads=2, head_dim=4], bf16> {
  // expected-error @+2 {{fused attention computes in f32 or f64, not 'bf16'}}
  // expected-error @+1 {{failed to legalize operation 'mt.attention'}}
  %o = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=16, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=16, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=16, heads=2, head_dim=4], bf16>
  return %o : !mt.tensor<[seq=16, heads=2, head_dim=4], bf16>
}
}

// -----

// Tests that fused attention within documents (mt.attention's positions) reads the ids in
// rows: [batch, seq] broadcast over the key/value heads and the group into [batch x kv
// heads, positions x group], each query block's rows sliced beside its scores; the mask
// hides a key after the query or before the query's document (the query position minus
// its id, compared signed), on every block the loops visit.
module attributes {mt.fused_attention = 8 : i64} {
// CHECK-DAG: #[[READ:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2)>
// CHECK-LABEL: func.func @documents
// CHECK: %[[B:.*]] = linalg.generic {indexing_maps = [#[[READ]], #{{.*}}], {{.*}} ins(%{{.*}} : tensor<2x16xi32>) outs(%{{.*}} : tensor<2x2x16x2xi32>)
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[B]] {{\[\[}}0, 1], [2, 3]] : tensor<2x2x16x2xi32> into tensor<4x32xi32>
// CHECK: scf.for
// CHECK: %[[IDS:.*]] = tensor.extract_slice %[[ROWS]][0, %{{.*}}] [4, 16] [1, 1] : tensor<4x32xi32> to tensor<4x16xi32>
// CHECK: scf.for
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[IDS]] : tensor<4x16x8xf32>, tensor<4x16xi32>)
// CHECK: %[[AFTER:.*]] = arith.cmpi ugt
// CHECK: %[[ID:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[START:.*]] = arith.subi %{{.*}}, %[[ID]] : index
// CHECK: %[[BEFORE:.*]] = arith.cmpi slt, %{{.*}}, %[[START]] : index
// CHECK: %[[HIDDEN:.*]] = arith.ori %[[AFTER]], %[[BEFORE]] : i1
// CHECK: arith.select %[[HIDDEN]]
// CHECK-NOT: mt.attention
func.func @documents(%q: !mt.tensor<[batch=2, seq=16, heads=4, head_dim=4], f32>, %k: !mt.tensor<[batch=2, seq=16, kv=2, head_dim=4], f32>, %ids: !mt.tensor<[batch=2, seq=16], i32>)
    -> !mt.tensor<[batch=2, seq=16, heads=4, head_dim=4], f32> {
  %o = mt.attention %q, %k, %k positions %ids dims(seq, heads, kv, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=16, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, kv=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, kv=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16], i32>
  return %o : !mt.tensor<[batch=2, seq=16, heads=4, head_dim=4], f32>
}
}

// -----

// Tests that the fused backward within documents masks its recomputed probabilities the
// same way: the p = exp(s - lse) block reads the scores, the block's log-sum-exp and its
// ids (here after the forward's loops, run again without saved statistics).
module attributes {mt.fused_attention = 8 : i64} {
// CHECK-LABEL: func.func @documents_backward
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] : tensor<2x1x16x1xi32> into tensor<2x16xi32>
// CHECK: arith.ori
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>)
// CHECK: scf.for
// CHECK: %[[IDS:.*]] = tensor.extract_slice %[[ROWS]][0, %{{.*}}] [2, 8] [1, 1] : tensor<2x16xi32> to tensor<2x8xi32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[IDS]] : tensor<2x8x8xf32>, tensor<2x8xf32>, tensor<2x8xi32>)
// CHECK: arith.ori
// CHECK: math.exp
// CHECK-NOT: mt.attention_grad
func.func @documents_backward(%q: !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, %ids: !mt.tensor<[batch=2, seq=16], i32>)
    -> !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32> {
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %q positions %ids : !mt.tensor<[batch=2, seq=16], i32> dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>, !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>
  return %dq : !mt.tensor<[batch=2, seq=16, heads=1, head_dim=4], f32>
}
}

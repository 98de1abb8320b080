// RUN: mt-opt %s -split-input-file | mt-opt -split-input-file | FileCheck %s
// RUN: mt-opt %s -split-input-file -mlir-print-op-generic | mt-opt -split-input-file | FileCheck %s

// Tests that the tensor type round-trips a scalar, every element type and dimension names
// that need quoting.
// CHECK-LABEL: func.func @tensor_types
// CHECK-SAME: !mt.tensor<[], f32>
// CHECK-SAME: !mt.tensor<[batch=2, seq=4], f64>
// CHECK-SAME: !mt.tensor<[hidden=8], f16>
// CHECK-SAME: !mt.tensor<[hidden=8], bf16>
// CHECK-SAME: !mt.tensor<[batch=2], i1>
// CHECK-SAME: !mt.tensor<[batch=2], i8>
// CHECK-SAME: !mt.tensor<[batch=2, seq=4], i32>
// CHECK-SAME: !mt.tensor<[batch=2, seq=4], i64>
// CHECK-SAME: !mt.tensor<["head-dim"=4, "2nd"=3, "with space"=1, layer.0=5], f32>
func.func @tensor_types(%a: !mt.tensor<[], f32>, %b: !mt.tensor<[batch=2, seq=4], f64>,
                        %c: !mt.tensor<[hidden=8], f16>, %d: !mt.tensor<[hidden=8], bf16>,
                        %e: !mt.tensor<[batch=2], i1>, %f: !mt.tensor<[batch=2], i8>,
                        %g: !mt.tensor<[batch=2, seq=4], i32>,
                        %h: !mt.tensor<[batch=2, seq=4], i64>,
                        %i: !mt.tensor<["head-dim"=4, "2nd"=3, "with space"=1, "layer.0"=5], f32>) {
  return
}

// -----

// Tests that parameters round-trip every initialiser kind, with and without a layer, and
// that param_ref reads them both from a layer body and from outside.
// CHECK-LABEL: mt.param @zeros : !mt.tensor<[hidden=8], f32> init zeros
// CHECK: mt.param @ones : !mt.tensor<[hidden=8], bf16> init ones
// CHECK: mt.param @normal : !mt.tensor<[vocab=16, hidden=8], f32> init normal(2.000000e-02)
// CHECK: mt.param @normal_mean : !mt.tensor<[hidden=8], f32> init normal(2.000000e-02, 1.000000e+00)
// CHECK: mt.param @uniform : !mt.tensor<[hidden=8], f32> init uniform(-1.000000e-01, 1.000000e-01)
// CHECK: mt.param @constant : !mt.tensor<[hidden=8], f16> init constant(3.000000e+00)
// CHECK: mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
// CHECK: mt.param @block.b layer @block : !mt.tensor<[hidden=8], f32> init zeros
module {
  mt.param @zeros : !mt.tensor<[hidden=8], f32> init zeros
  mt.param @ones : !mt.tensor<[hidden=8], bf16> init ones
  mt.param @normal : !mt.tensor<[vocab=16, hidden=8], f32> init normal(0.02)
  mt.param @normal_mean : !mt.tensor<[hidden=8], f32> init normal(0.02, 1.0)
  mt.param @uniform : !mt.tensor<[hidden=8], f32> init uniform(-0.1, 0.1)
  mt.param @constant : !mt.tensor<[hidden=8], f16> init constant(3.0)
  mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
  mt.param @block.b layer @block : !mt.tensor<[hidden=8], f32> init zeros

  // CHECK-LABEL: func.func @block
  // CHECK: mt.param_ref @block.g : <[hidden=8], f32>
  // CHECK: mt.param_ref @block.b : <[hidden=8], f32>
  // CHECK: mt.param_ref @zeros : <[hidden=8], f32>
  func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=8], f32>
    %b = mt.param_ref @block.b : !mt.tensor<[hidden=8], f32>
    %z = mt.param_ref @zeros : !mt.tensor<[hidden=8], f32>
    return %x : !mt.tensor<[hidden=8], f32>
  }

  // CHECK-LABEL: func.func @param_ref
  // CHECK: mt.param_ref @normal : <[vocab=16, hidden=8], f32>
  // CHECK: mt.param_ref @constant : <[hidden=8], f16>
  func.func @param_ref() -> !mt.tensor<[vocab=16, hidden=8], f32> {
    %w = mt.param_ref @normal : !mt.tensor<[vocab=16, hidden=8], f32>
    %c = mt.param_ref @constant : !mt.tensor<[hidden=8], f16>
    return %w : !mt.tensor<[vocab=16, hidden=8], f32>
  }
}

// -----

// Tests that constant round-trips its value and scalar type.
// CHECK-LABEL: func.func @constant
// CHECK: mt.constant 5.000000e-01 : <[], f32>
// CHECK: mt.constant -2.000000e+00 : <[], bf16>
func.func @constant() -> !mt.tensor<[], f32> {
  %0 = mt.constant 0.5 : !mt.tensor<[], f32>
  %1 = mt.constant -2.0 : !mt.tensor<[], bf16>
  return %0 : !mt.tensor<[], f32>
}

// -----

// Tests that the binary elementwise ops round-trip on operands of one type.
// CHECK-LABEL: func.func @binary
// CHECK: mt.add %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.sub %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.mul %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.div %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.max %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.pow %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.add %{{.*}}, %{{.*}} : <[batch=2], i32>, <[batch=2], i32> -> <[batch=2], i32>
func.func @binary(%a: !mt.tensor<[batch=2, hidden=8], f32>, %b: !mt.tensor<[batch=2, hidden=8], f32>,
                  %i: !mt.tensor<[batch=2], i32>) {
  %0 = mt.add %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.sub %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %2 = mt.mul %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %3 = mt.div %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %4 = mt.max %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %5 = mt.pow %a, %b : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %6 = mt.add %i, %i : !mt.tensor<[batch=2], i32>, !mt.tensor<[batch=2], i32> -> !mt.tensor<[batch=2], i32>
  return
}

// -----

// Tests that named broadcasting puts the lhs dimensions first, then the rhs dimensions the
// lhs lacks, and that a scalar combines with any tensor on either side.
// CHECK-LABEL: func.func @broadcast
// CHECK: mt.add %{{.*}}, %{{.*}} : <[batch=2, seq=4], f32>, <[hidden=8, seq=4], f32> -> <[batch=2, seq=4, hidden=8], f32>
// CHECK: mt.mul %{{.*}}, %{{.*}} : <[], f32>, <[batch=2, seq=4], f32> -> <[batch=2, seq=4], f32>
// CHECK: mt.div %{{.*}}, %{{.*}} : <[batch=2, seq=4], f32>, <[], f32> -> <[batch=2, seq=4], f32>
// CHECK: mt.max %{{.*}}, %{{.*}} : <[hidden=8], f32>, <[batch=2, seq=4], f32> -> <[hidden=8, batch=2, seq=4], f32>
func.func @broadcast(%a: !mt.tensor<[batch=2, seq=4], f32>, %b: !mt.tensor<[hidden=8, seq=4], f32>,
                     %s: !mt.tensor<[], f32>, %h: !mt.tensor<[hidden=8], f32>) {
  %0 = mt.add %a, %b : !mt.tensor<[batch=2, seq=4], f32>, !mt.tensor<[hidden=8, seq=4], f32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
  %1 = mt.mul %s, %a : !mt.tensor<[], f32>, !mt.tensor<[batch=2, seq=4], f32> -> !mt.tensor<[batch=2, seq=4], f32>
  %2 = mt.div %a, %s : !mt.tensor<[batch=2, seq=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[batch=2, seq=4], f32>
  %3 = mt.max %h, %a : !mt.tensor<[hidden=8], f32>, !mt.tensor<[batch=2, seq=4], f32> -> !mt.tensor<[hidden=8, batch=2, seq=4], f32>
  return
}

// -----

// Tests that the unary elementwise ops round-trip, gelu with and without `approximate`.
// CHECK-LABEL: func.func @unary
// CHECK: mt.neg %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.exp %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.log %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.sqrt %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.rsqrt %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.tanh %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.sigmoid %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.relu %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.silu %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.gelu %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.gelu %{{.*}} approximate : <[batch=2, hidden=8], bf16>
func.func @unary(%a: !mt.tensor<[batch=2, hidden=8], f32>, %b: !mt.tensor<[batch=2, hidden=8], bf16>) {
  %0 = mt.neg %a : !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.exp %a : !mt.tensor<[batch=2, hidden=8], f32>
  %2 = mt.log %a : !mt.tensor<[batch=2, hidden=8], f32>
  %3 = mt.sqrt %a : !mt.tensor<[batch=2, hidden=8], f32>
  %4 = mt.rsqrt %a : !mt.tensor<[batch=2, hidden=8], f32>
  %5 = mt.tanh %a : !mt.tensor<[batch=2, hidden=8], f32>
  %6 = mt.sigmoid %a : !mt.tensor<[batch=2, hidden=8], f32>
  %7 = mt.relu %a : !mt.tensor<[batch=2, hidden=8], f32>
  %8 = mt.silu %a : !mt.tensor<[batch=2, hidden=8], f32>
  %9 = mt.gelu %a : !mt.tensor<[batch=2, hidden=8], f32>
  %10 = mt.gelu %b approximate : !mt.tensor<[batch=2, hidden=8], bf16>
  return
}

// -----

// Tests that cast round-trips an element type change.
// CHECK-LABEL: func.func @cast
// CHECK: mt.cast %{{.*}} : <[batch=2, hidden=8], f32> to <[batch=2, hidden=8], bf16>
// CHECK: mt.cast %{{.*}} : <[batch=2], i32> to <[batch=2], f32>
func.func @cast(%a: !mt.tensor<[batch=2, hidden=8], f32>, %i: !mt.tensor<[batch=2], i32>) {
  %0 = mt.cast %a : !mt.tensor<[batch=2, hidden=8], f32> to !mt.tensor<[batch=2, hidden=8], bf16>
  %1 = mt.cast %i : !mt.tensor<[batch=2], i32> to !mt.tensor<[batch=2], f32>
  return
}

// -----

// Tests that transpose round-trips a reordering of the dimensions.
// CHECK-LABEL: func.func @transpose
// CHECK: mt.transpose %{{.*}} : <[batch=2, seq=4, hidden=8], f32> to <[hidden=8, batch=2, seq=4], f32>
func.func @transpose(%a: !mt.tensor<[batch=2, seq=4, hidden=8], f32>) {
  %0 = mt.transpose %a : !mt.tensor<[batch=2, seq=4, hidden=8], f32> to !mt.tensor<[hidden=8, batch=2, seq=4], f32>
  return
}

// -----

// Tests that contract round-trips over one dimension, over two, and with batch dimensions
// that both operands keep.
// CHECK-LABEL: func.func @contract
// CHECK: mt.contract %{{.*}}, %{{.*}} over [hidden] : <[batch=2, seq=4, hidden=8], f32>, <[hidden=8, ffn=16], f32> -> <[batch=2, seq=4, ffn=16], f32>
// CHECK: mt.contract %{{.*}}, %{{.*}} over [heads, head_dim] : <[seq=4, heads=2, head_dim=4], f32>, <[heads=2, head_dim=4, hidden=8], f32> -> <[seq=4, hidden=8], f32>
// CHECK: mt.contract %{{.*}}, %{{.*}} over [head_dim] : <[batch=2, heads=2, seq=4, head_dim=4], f32>, <[batch=2, heads=2, kv_seq=6, head_dim=4], f32> -> <[batch=2, heads=2, seq=4, kv_seq=6], f32>
func.func @contract(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %w: !mt.tensor<[hidden=8, ffn=16], f32>,
                    %a: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %wo: !mt.tensor<[heads=2, head_dim=4, hidden=8], f32>,
                    %q: !mt.tensor<[batch=2, heads=2, seq=4, head_dim=4], f32>,
                    %k: !mt.tensor<[batch=2, heads=2, kv_seq=6, head_dim=4], f32>) {
  %0 = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[batch=2, seq=4, ffn=16], f32>
  %1 = mt.contract %a, %wo over [heads, head_dim] : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
  %2 = mt.contract %q, %k over [head_dim] : !mt.tensor<[batch=2, heads=2, seq=4, head_dim=4], f32>, !mt.tensor<[batch=2, heads=2, kv_seq=6, head_dim=4], f32> -> !mt.tensor<[batch=2, heads=2, seq=4, kv_seq=6], f32>
  return
}

// -----

// Tests that the reductions round-trip over one and several dimensions, down to a scalar.
// CHECK-LABEL: func.func @reduce
// CHECK: mt.reduce_sum %{{.*}} over [hidden] : <[batch=2, seq=4, hidden=8], f32> -> <[batch=2, seq=4], f32>
// CHECK: mt.reduce_mean %{{.*}} over [batch, seq] : <[batch=2, seq=4, hidden=8], f32> -> <[hidden=8], f32>
// CHECK: mt.reduce_max %{{.*}} over [seq, batch, hidden] : <[batch=2, seq=4, hidden=8], f32> -> <[], f32>
func.func @reduce(%a: !mt.tensor<[batch=2, seq=4, hidden=8], f32>) {
  %0 = mt.reduce_sum %a over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4], f32>
  %1 = mt.reduce_mean %a over [batch, seq] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
  %2 = mt.reduce_max %a over [seq, batch, hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that softmax round-trips its dimension.
// CHECK-LABEL: func.func @softmax
// CHECK: mt.softmax %{{.*}} over kv_seq : <[heads=2, seq=4, kv_seq=4], f32>
func.func @softmax(%a: !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>) {
  %0 = mt.softmax %a over kv_seq : !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>
  return
}

// -----

// Tests that layer_norm round-trips without bias (default epsilon, not printed) and with
// bias and a custom epsilon.
// CHECK-LABEL: func.func @layer_norm
// CHECK: mt.layer_norm %{{.*}}, %{{.*}} over hidden : <[batch=2, hidden=8], f32>, <[hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.layer_norm %{{.*}}, %{{.*}}, %{{.*}} over hidden {epsilon = 1.000000e-03 : f64} : <[batch=2, hidden=8], f32>, <[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> <[batch=2, hidden=8], f32>
func.func @layer_norm(%x: !mt.tensor<[batch=2, hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>,
                      %b: !mt.tensor<[hidden=8], f32>) {
  %0 = mt.layer_norm %x, %g over hidden : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.layer_norm %x, %g, %b over hidden {epsilon = 1.0e-3 : f64} : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  return
}

// -----

// Tests that rms_norm round-trips with the default and a custom epsilon.
// CHECK-LABEL: func.func @rms_norm
// CHECK: mt.rms_norm %{{.*}}, %{{.*}} over hidden : <[batch=2, hidden=8], bf16>, <[hidden=8], bf16> -> <[batch=2, hidden=8], bf16>
// CHECK: mt.rms_norm %{{.*}}, %{{.*}} over hidden {epsilon = 1.000000e-05 : f64} : <[batch=2, hidden=8], bf16>, <[hidden=8], bf16> -> <[batch=2, hidden=8], bf16>
func.func @rms_norm(%x: !mt.tensor<[batch=2, hidden=8], bf16>, %g: !mt.tensor<[hidden=8], bf16>) {
  %0 = mt.rms_norm %x, %g over hidden : !mt.tensor<[batch=2, hidden=8], bf16>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[batch=2, hidden=8], bf16>
  %1 = mt.rms_norm %x, %g over hidden {epsilon = 1.0e-5 : f64} : !mt.tensor<[batch=2, hidden=8], bf16>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[batch=2, hidden=8], bf16>
  return
}

// -----

// Tests that rope round-trips with the default and a custom theta.
// CHECK-LABEL: func.func @rope
// CHECK: mt.rope %{{.*}} over head_dim position seq : <[batch=2, seq=4, heads=2, head_dim=8], f32>
// CHECK: mt.rope %{{.*}} over head_dim position seq {theta = 5.000000e+05 : f64} : <[batch=2, seq=4, heads=2, head_dim=8], f32>
func.func @rope(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>) {
  %0 = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %1 = mt.rope %x over head_dim position seq {theta = 500000.0 : f64} : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  return
}

// -----

// Tests that rope round-trips with position ids (batch and sequence) and inverse.
// CHECK-LABEL: func.func @rope_position_ids
// CHECK: mt.rope %{{.*}} over head_dim position seq at %{{.*}} : !mt.tensor<[batch=2, seq=4], i32> : <[batch=2, seq=4, heads=2, head_dim=8], f32>
// CHECK: mt.rope %{{.*}} over head_dim position seq at %{{.*}} : !mt.tensor<[seq=4], i64> inverse : <[batch=2, seq=4, heads=2, head_dim=8], f32>
func.func @rope_position_ids(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>, %shared: !mt.tensor<[seq=4], i64>) {
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %1 = mt.rope %x over head_dim position seq at %shared : !mt.tensor<[seq=4], i64> inverse : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  return
}

// -----

// Tests that attention round-trips causal multi-head, grouped-query with a separate
// kv_heads dimension, and non-causal attention over a key sequence of another length.
// CHECK-LABEL: func.func @attention
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, seq=4, heads=4, head_dim=4], f32>
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, kv_heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, heads, head_dim) scale 1.250000e-01 : <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>
func.func @attention(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>,
                     %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>,
                     %m: !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>) {
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>
  %1 = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
  %2 = mt.attention %q, %m, %m dims(seq, heads, heads, head_dim) scale 0.125 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>
  return
}

// Tests that attention saving its log-sum-exp (save_lse: one value per query row and head)
// and attention_grad taking the forward's output and log-sum-exp back round-trip.
// CHECK-LABEL: func.func @attention_saved
// CHECK: %[[O:.*]], %[[L:.*]] = mt.attention %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, kv_heads, head_dim) causal scale 5.000000e-01 save_lse : <[batch=2, seq=4, heads=4, head_dim=4], f32>
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved(%[[O]], %[[L]] : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4], f32>) dims(seq, heads, kv_heads, head_dim) causal scale 5.000000e-01
func.func @attention_saved(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>,
                           %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>,
                           %do: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>) {
  %o, %lse = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) causal scale 0.5 save_lse : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
  %0:3 = mt.attention_grad %q, %k, %k, %do saved(%o, %lse : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4], f32>) dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention and attention_grad round-trip document positions (the position ids
// of --reset-attention-mask), attention_grad's after the saved values.
// CHECK-LABEL: func.func @attention_positions
// CHECK: %[[O:.*]], %[[L:.*]] = mt.attention %{{.*}}, %{{.*}}, %{{.*}} positions %[[IDS:[^ ]*]] dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 save_lse : <[batch=2, seq=4, heads=2, head_dim=4], f32>, <[batch=2, seq=4, heads=2, head_dim=4], f32>, <[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4], i32>
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved(%[[O]], %[[L]] : {{.*}}) positions %[[IDS]] : !mt.tensor<[batch=2, seq=4], i32> dims(seq, heads, heads, head_dim) causal scale 5.000000e-01
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %[[IDS]] : !mt.tensor<[batch=2, seq=4], i32> dims(seq, heads, heads, head_dim) causal
func.func @attention_positions(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) {
  %o, %lse = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 save_lse : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4], i32>
  %0:3 = mt.attention_grad %q, %q, %q, %q saved(%o, %lse : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2], f32>) positions %ids : !mt.tensor<[batch=2, seq=4], i32> dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
  %1:3 = mt.attention_grad %q, %q, %q, %q positions %ids : !mt.tensor<[batch=2, seq=4], i32> dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that gather round-trips an embedding lookup.
// CHECK-LABEL: func.func @gather
// CHECK: mt.gather %{{.*}}, %{{.*}} over vocab : <[vocab=16, hidden=8], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=8], f32>
func.func @gather(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[batch=2, seq=4], i32>) {
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
  return
}

// -----

// Tests that cross_entropy round-trips, with labels whose dimensions are in another order.
// CHECK-LABEL: func.func @cross_entropy
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} over vocab : <[batch=2, seq=4, vocab=16], f32>, <[batch=2, seq=4], i64> -> <[], f32>
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} over vocab : <[batch=2, seq=4, vocab=16], f32>, <[seq=4, batch=2], i32> -> <[], f32>
func.func @cross_entropy(%l: !mt.tensor<[batch=2, seq=4, vocab=16], f32>, %t: !mt.tensor<[batch=2, seq=4], i64>,
                         %u: !mt.tensor<[seq=4, batch=2], i32>) {
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[batch=2, seq=4], i64> -> !mt.tensor<[], f32>
  %1 = mt.cross_entropy %l, %u over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[seq=4, batch=2], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy and its adjoint round-trip with a loss mask (mt-loss-mask), whose
// type is printed in full.
// CHECK-LABEL: func.func @cross_entropy_mask
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} mask %{{.*}} over vocab : <[batch=2, seq=4, vocab=16], f32>, <[batch=2, seq=4], i32>, !mt.tensor<[batch=2, seq=4], f32> -> <[], f32>
// CHECK: mt.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} over vocab : <[batch=2, seq=4, vocab=16], f32>, <[batch=2, seq=4], i32>, <[], f32>, !mt.tensor<[batch=2, seq=4], f32> -> <[batch=2, seq=4, vocab=16], f32>
func.func @cross_entropy_mask(%l: !mt.tensor<[batch=2, seq=4, vocab=16], f32>, %t: !mt.tensor<[batch=2, seq=4], i32>,
                              %m: !mt.tensor<[batch=2, seq=4], f32>, %dl: !mt.tensor<[], f32>) {
  %0 = mt.cross_entropy %l, %t mask %m over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[batch=2, seq=4], i32>, !mt.tensor<[batch=2, seq=4], f32> -> !mt.tensor<[], f32>
  %1 = mt.cross_entropy_grad %l, %t, %dl mask %m over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[batch=2, seq=4], i32>, !mt.tensor<[], f32>, !mt.tensor<[batch=2, seq=4], f32> -> !mt.tensor<[batch=2, seq=4, vocab=16], f32>
  return
}

// -----

// Tests that dropout round-trips its rate and stream, including rate 0.
// CHECK-LABEL: func.func @dropout
// CHECK: mt.dropout %{{.*}} rate 1.000000e-01 stream 3 : <[batch=2, hidden=8], f32>
// CHECK: mt.dropout %{{.*}} rate 0.000000e+00 stream 0 : <[batch=2, hidden=8], f32>
func.func @dropout(%x: !mt.tensor<[batch=2, hidden=8], f32>) {
  %0 = mt.dropout %x rate 0.1 stream 3 : !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.dropout %x rate 0.0 stream 0 : !mt.tensor<[batch=2, hidden=8], f32>
  return
}

// -----

// Tests that split, merge and rename round-trip; split keeps the position of the dimension
// it replaces and merge puts the new dimension where the first listed one was.
// CHECK-LABEL: func.func @reshape
// CHECK: mt.split %{{.*}} hidden into [heads, head_dim] : <[batch=2, hidden=8, seq=4], f32> -> <[batch=2, heads=2, head_dim=4, seq=4], f32>
// CHECK: mt.split %{{.*}} hidden into [a, b, c] : <[batch=2, hidden=8, seq=4], f32> -> <[batch=2, a=2, b=2, c=2, seq=4], f32>
// CHECK: mt.merge %{{.*}} [heads, head_dim] into hidden : <[batch=2, heads=2, head_dim=4, seq=4], f32> -> <[batch=2, hidden=8, seq=4], f32>
// CHECK: mt.merge %{{.*}} [seq, batch] into tokens : <[batch=2, hidden=8, seq=4], f32> -> <[hidden=8, tokens=8], f32>
// CHECK: mt.rename %{{.*}} seq to kv_seq : <[batch=2, hidden=8, seq=4], f32> -> <[batch=2, hidden=8, kv_seq=4], f32>
func.func @reshape(%x: !mt.tensor<[batch=2, hidden=8, seq=4], f32>) {
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[batch=2, hidden=8, seq=4], f32> -> !mt.tensor<[batch=2, heads=2, head_dim=4, seq=4], f32>
  %1 = mt.split %x hidden into [a, b, c] : !mt.tensor<[batch=2, hidden=8, seq=4], f32> -> !mt.tensor<[batch=2, a=2, b=2, c=2, seq=4], f32>
  %2 = mt.merge %0 [heads, head_dim] into hidden : !mt.tensor<[batch=2, heads=2, head_dim=4, seq=4], f32> -> !mt.tensor<[batch=2, hidden=8, seq=4], f32>
  %3 = mt.merge %x [seq, batch] into tokens : !mt.tensor<[batch=2, hidden=8, seq=4], f32> -> !mt.tensor<[hidden=8, tokens=8], f32>
  %4 = mt.rename %x seq to kv_seq : !mt.tensor<[batch=2, hidden=8, seq=4], f32> -> !mt.tensor<[batch=2, hidden=8, kv_seq=4], f32>
  return
}

// -----

// Tests that the mixture-of-experts ops round-trip: topk routing, dispatch to
// capacity-limited expert buffers (capacity = ceil(1.25 * 8 * 2 / 4) = 5) and dropless ones
// (capacity = 8 tokens), combine back, the balancing loss, the z-loss and the counts of
// tokens per expert.
// CHECK-LABEL: func.func @moe
// CHECK: mt.topk %{{.*}} over expert k k : <[tokens=8, expert=4], f32> -> <[tokens=8, k=2], f32>, <[tokens=8, k=2], i32>
// CHECK: mt.dispatch %{{.*}}, %{{.*}} k k to expert capacity cap factor 1.250000e+00 : <[tokens=8, hidden=4], f32>, <[tokens=8, k=2], i32> -> <[expert=4, cap=5, hidden=4], f32>
// CHECK: mt.combine %{{.*}}, %{{.*}}, %{{.*}} k k from expert capacity cap : <[expert=4, cap=5, hidden=4], f32>, <[tokens=8, k=2], i32>, <[tokens=8, k=2], f32> -> <[tokens=8, hidden=4], f32>
// CHECK: mt.dispatch %{{.*}}, %{{.*}} k k to expert capacity cap dropless : <[tokens=8, hidden=4], f32>, <[tokens=8, k=2], i32> -> <[expert=4, cap=8, hidden=4], f32>
// CHECK: mt.load_balancing_loss %{{.*}}, %{{.*}} over expert k k : <[tokens=8, expert=4], f32>, <[tokens=8, k=2], i32> -> <[], f32>
// CHECK: mt.z_loss %{{.*}} over expert : <[tokens=8, expert=4], f32> -> <[], f32>
// CHECK: mt.expert_load %{{.*}} k k to expert : <[tokens=8, k=2], i32> -> <[expert=4], i64>
func.func @moe(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %logits: !mt.tensor<[tokens=8, expert=4], f32>) {
  %w, %i = mt.topk %logits over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], i32>
  %d = mt.dispatch %x, %i k k to expert capacity cap factor 1.25 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>
  %c = mt.combine %d, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  %dropless = mt.dispatch %x, %i k k to expert capacity cap dropless : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=8, hidden=4], f32>
  %l = mt.load_balancing_loss %logits, %i over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[], f32>
  %z = mt.z_loss %logits over expert : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[], f32>
  %n = mt.expert_load %i k k to expert : !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4], i64>
  return
}

// -----

// Tests that repeat round-trips a call of a layer function with one and with two carried
// values.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: attributes {mt.layer}
func.func @layer(%x: !mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32>
    attributes {mt.layer} {
  %0 = mt.gelu %x : !mt.tensor<[batch=2, hidden=8], f32>
  return %0 : !mt.tensor<[batch=2, hidden=8], f32>
}

// CHECK-LABEL: func.func @layer2
// CHECK-SAME: attributes {mt.layer}
func.func @layer2(%x: !mt.tensor<[batch=2, hidden=8], f32>, %y: !mt.tensor<[], f32>)
    -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>) attributes {mt.layer} {
  return %x, %y : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>
}

// CHECK-LABEL: func.func @repeat
// CHECK: mt.repeat @layer(%{{.*}}) count 12 : (!mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32>
// CHECK: mt.repeat @layer2(%{{.*}}, %{{.*}}) count 1 : (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>) -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>)
func.func @repeat(%x: !mt.tensor<[batch=2, hidden=8], f32>, %s: !mt.tensor<[], f32>) -> !mt.tensor<[batch=2, hidden=8], f32> {
  %0 = mt.repeat @layer(%x) count 12 : (!mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32>
  %1:2 = mt.repeat @layer2(%0, %s) count 1 : (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>) -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[], f32>)
  return %1#0 : !mt.tensor<[batch=2, hidden=8], f32>
}

// -----

// Tests that optimizer state round-trips for a parameter and, stacked along `layers`, for
// a layer parameter; that param_ref reads a state and, outside the layer, all instances of
// a layer parameter stacked; and that assign writes parameters and states.
// CHECK-LABEL: mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
// CHECK: mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
// CHECK: mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
// CHECK: mt.state @block.g.m of @block.g : !mt.tensor<[layers=3, hidden=8], f32>
// CHECK-LABEL: func.func @step
// CHECK: %[[M:.*]] = mt.param_ref @w.m : <[hidden=8], f32>
// CHECK: %[[G:.*]] = mt.param_ref @block.g : <[layers=3, hidden=8], f32>
// CHECK: %[[GM:.*]] = mt.param_ref @block.g.m : <[layers=3, hidden=8], f32>
// CHECK: mt.assign @w, %[[M]] : <[hidden=8], f32>
// CHECK: mt.assign @w.m, %{{.*}} : <[hidden=8], f32>
// CHECK: mt.assign @block.g, %[[GM]] : <[layers=3, hidden=8], f32>
// CHECK: mt.assign @block.g.m, %[[G]] : <[layers=3, hidden=8], f32>
module {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
  mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
  mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
  mt.state @block.g.m of @block.g : !mt.tensor<[layers=3, hidden=8], f32>

  func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=8], f32>
  }

  func.func @step(%v: !mt.tensor<[hidden=8], f32>) {
    %m = mt.param_ref @w.m : !mt.tensor<[hidden=8], f32>
    %g = mt.param_ref @block.g : !mt.tensor<[layers=3, hidden=8], f32>
    %gm = mt.param_ref @block.g.m : !mt.tensor<[layers=3, hidden=8], f32>
    mt.assign @w, %m : !mt.tensor<[hidden=8], f32>
    mt.assign @w.m, %v : !mt.tensor<[hidden=8], f32>
    mt.assign @block.g, %gm : !mt.tensor<[layers=3, hidden=8], f32>
    mt.assign @block.g.m, %g : !mt.tensor<[layers=3, hidden=8], f32>
    return
  }
}

// -----

// Tests that repeat round-trips carried and stacked operands and results, a custom
// stacking dimension and `reverse`, calling a function derived from a layer (marked
// `mt.layer_of`) that reads the layer's parameter instance.
// CHECK-LABEL: func.func @block
// CHECK-SAME: attributes {mt.layer}
// CHECK-LABEL: func.func @block.bwd
// CHECK-SAME: attributes {mt.layer_of = @block}
// CHECK: mt.param_ref @block.g : <[hidden=8], f32>
// CHECK-LABEL: func.func @repeat_stacked
// CHECK: %{{.*}}:2 = mt.repeat @block.bwd(%{{.*}}, %{{.*}}) count 3 {carried = 1 : i64, reverse} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>)
// CHECK: %{{.*}}:2 = mt.repeat @block.bwd(%{{.*}}, %{{.*}}) count 3 {carried = 1 : i64, stack_dim = "depth"} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[depth=3, hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[depth=3, hidden=8], f32>)
// CHECK: %{{.*}} = mt.repeat @block.fwd(%{{.*}}) count 3 {carried = 0 : i64} : (!mt.tensor<[layers=3, hidden=8], f32>) -> !mt.tensor<[layers=3, hidden=8], f32>
module {
  mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones

  func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=8], f32>
  }

  func.func @block.fwd(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer_of = @block} {
    return %x : !mt.tensor<[hidden=8], f32>
  }

  func.func @block.bwd(%dy: !mt.tensor<[hidden=8], f32>, %saved: !mt.tensor<[hidden=8], f32>)
      -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>)
      attributes {mt.layer_of = @block} {
    %g = mt.param_ref @block.g : !mt.tensor<[hidden=8], f32>
    %dx = mt.mul %dy, %g : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
    %dg = mt.mul %dy, %saved : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
    return %dx, %dg : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>
  }

  func.func @repeat_stacked(%dy: !mt.tensor<[hidden=8], f32>, %saved: !mt.tensor<[layers=3, hidden=8], f32>,
                            %other: !mt.tensor<[depth=3, hidden=8], f32>) {
    %0:2 = mt.repeat @block.bwd(%dy, %saved) count 3 {carried = 1 : i64, reverse} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>)
    %1:2 = mt.repeat @block.bwd(%dy, %other) count 3 {carried = 1 : i64, stack_dim = "depth"} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[depth=3, hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[depth=3, hidden=8], f32>)
    %2 = mt.repeat @block.fwd(%saved) count 3 {carried = 0 : i64} : (!mt.tensor<[layers=3, hidden=8], f32>) -> !mt.tensor<[layers=3, hidden=8], f32>
    return
  }
}

// -----

// Tests that iota round-trips floating-point and integer positions, including a dimension
// name that needs quoting.
// CHECK-LABEL: func.func @iota
// CHECK: mt.iota dim seq : <[seq=8], f32>
// CHECK: mt.iota dim seq : <[seq=256], bf16>
// CHECK: mt.iota dim n : <[n=4], i32>
// CHECK: mt.iota dim "kv-seq" : <["kv-seq"=128], i8>
func.func @iota() {
  %0 = mt.iota dim seq : !mt.tensor<[seq=8], f32>
  %1 = mt.iota dim seq : !mt.tensor<[seq=256], bf16>
  %2 = mt.iota dim n : !mt.tensor<[n=4], i32>
  %3 = mt.iota dim "kv-seq" : !mt.tensor<["kv-seq"=128], i8>
  return
}

// -----

// Tests that the elementwise helpers of the backward pass round-trip: cos, greater with
// named broadcasting, and gelu_grad in both forms.
// CHECK-LABEL: func.func @backward_elementwise
// CHECK: mt.cos %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[batch=2, hidden=8], f32>, <[hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[hidden=8], f32>, <[], f32> -> <[hidden=8], f32>
// CHECK: mt.gelu_grad %{{.*}} : <[batch=2, hidden=8], f32>
// CHECK: mt.gelu_grad %{{.*}} approximate : <[batch=2, hidden=8], bf16>
func.func @backward_elementwise(%a: !mt.tensor<[batch=2, hidden=8], f32>, %h: !mt.tensor<[hidden=8], f32>,
                                %s: !mt.tensor<[], f32>, %b: !mt.tensor<[batch=2, hidden=8], bf16>) {
  %0 = mt.cos %a : !mt.tensor<[batch=2, hidden=8], f32>
  %1 = mt.greater %a, %h : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %2 = mt.greater %h, %s : !mt.tensor<[hidden=8], f32>, !mt.tensor<[], f32> -> !mt.tensor<[hidden=8], f32>
  %3 = mt.gelu_grad %a : !mt.tensor<[batch=2, hidden=8], f32>
  %4 = mt.gelu_grad %b approximate : !mt.tensor<[batch=2, hidden=8], bf16>
  return
}

// -----

// Tests that broadcast round-trips new dimensions in any position, from a scalar and from
// integer ids.
// CHECK-LABEL: func.func @broadcast_op
// CHECK: mt.broadcast %{{.*}} : <[hidden=8], f32> to <[batch=2, hidden=8, seq=4], f32>
// CHECK: mt.broadcast %{{.*}} : <[], f32> to <[seq=4], f32>
// CHECK: mt.broadcast %{{.*}} : <[batch=2, seq=4], i32> to <[seq=4, batch=2, k=1], i32>
func.func @broadcast_op(%h: !mt.tensor<[hidden=8], f32>, %s: !mt.tensor<[], f32>, %i: !mt.tensor<[batch=2, seq=4], i32>) {
  %0 = mt.broadcast %h : !mt.tensor<[hidden=8], f32> to !mt.tensor<[batch=2, hidden=8, seq=4], f32>
  %1 = mt.broadcast %s : !mt.tensor<[], f32> to !mt.tensor<[seq=4], f32>
  %2 = mt.broadcast %i : !mt.tensor<[batch=2, seq=4], i32> to !mt.tensor<[seq=4, batch=2, k=1], i32>
  return
}

// -----

// Tests that rope round-trips `inverse`, alone and with a custom theta.
// CHECK-LABEL: func.func @rope_inverse
// CHECK: mt.rope %{{.*}} over head_dim position seq inverse : <[batch=2, seq=4, heads=2, head_dim=8], f32>
// CHECK: mt.rope %{{.*}} over head_dim position seq inverse {theta = 5.000000e+05 : f64} : <[batch=2, seq=4, heads=2, head_dim=8], f32>
func.func @rope_inverse(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>) {
  %0 = mt.rope %x over head_dim position seq inverse : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %1 = mt.rope %x over head_dim position seq inverse {theta = 500000.0 : f64} : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  return
}

// -----

// Tests that attention_grad round-trips causal grouped-query attention and non-causal
// multi-head attention over a key sequence of another length.
// CHECK-LABEL: func.func @attention_grad
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, kv_heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, <[batch=2, seq=4, heads=4, head_dim=4], f32> -> <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, <[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} dims(seq, heads, heads, head_dim) scale 1.250000e-01 : <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>, <[batch=2, seq=4, heads=4, head_dim=4], f32> -> <[batch=2, seq=4, heads=4, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>, <[batch=2, heads=4, seq=6, head_dim=4], f32>
func.func @attention_grad(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>,
                          %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>,
                          %m: !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>,
                          %do: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>) {
  %0:3 = mt.attention_grad %q, %k, %k, %do dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=4], f32>
  %1:3 = mt.attention_grad %q, %m, %m, %do dims(seq, heads, heads, head_dim) scale 0.125 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>, !mt.tensor<[batch=2, heads=4, seq=6, head_dim=4], f32>
  return
}

// -----

// Tests that the adjoints of gather and cross_entropy round-trip: embedding_grad scatters
// a gathered gradient back into the table's type, cross_entropy_grad takes labels whose
// dimensions are in another order.
// CHECK-LABEL: func.func @embedding_loss_grad
// CHECK: mt.embedding_grad %{{.*}}, %{{.*}} over vocab : <[batch=2, seq=4], i32>, <[batch=2, seq=4, hidden=8], f32> -> <[vocab=16, hidden=8], f32>
// CHECK: mt.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} over vocab : <[batch=2, seq=4, vocab=16], f32>, <[seq=4, batch=2], i64>, <[], f32> -> <[batch=2, seq=4, vocab=16], f32>
func.func @embedding_loss_grad(%t: !mt.tensor<[batch=2, seq=4], i32>, %g: !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
                               %l: !mt.tensor<[batch=2, seq=4, vocab=16], f32>, %u: !mt.tensor<[seq=4, batch=2], i64>,
                               %dl: !mt.tensor<[], f32>) {
  %0 = mt.embedding_grad %t, %g over vocab : !mt.tensor<[batch=2, seq=4], i32>, !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[vocab=16, hidden=8], f32>
  %1 = mt.cross_entropy_grad %l, %u, %dl over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[seq=4, batch=2], i64>, !mt.tensor<[], f32> -> !mt.tensor<[batch=2, seq=4, vocab=16], f32>
  return
}

// -----

// Tests that the mixture-of-experts adjoints round-trip: topk_grad scatters the values'
// gradient into the router logits' type, combine_grad returns the gradients of the expert
// outputs and of the weights, load_balancing_loss_grad the logits' gradient.
// CHECK-LABEL: func.func @moe_grad
// CHECK: mt.topk_grad %{{.*}}, %{{.*}} over expert k k : <[tokens=8, k=2], f32>, <[tokens=8, k=2], i32> -> <[tokens=8, expert=4], f32>
// CHECK: mt.combine_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} k k from expert capacity cap : <[expert=4, cap=5, hidden=4], f32>, <[tokens=8, k=2], i32>, <[tokens=8, k=2], f32>, <[tokens=8, hidden=4], f32> -> <[expert=4, cap=5, hidden=4], f32>, <[tokens=8, k=2], f32>
// CHECK: mt.load_balancing_loss_grad %{{.*}}, %{{.*}}, %{{.*}} over expert k k : <[tokens=8, expert=4], f32>, <[tokens=8, k=2], i32>, <[], f32> -> <[tokens=8, expert=4], f32>
func.func @moe_grad(%dv: !mt.tensor<[tokens=8, k=2], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>,
                    %w: !mt.tensor<[tokens=8, k=2], f32>, %d: !mt.tensor<[expert=4, cap=5, hidden=4], f32>,
                    %dc: !mt.tensor<[tokens=8, hidden=4], f32>, %logits: !mt.tensor<[tokens=8, expert=4], f32>,
                    %dl: !mt.tensor<[], f32>) {
  %0 = mt.topk_grad %dv, %i over expert k k : !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[tokens=8, expert=4], f32>
  %1:2 = mt.combine_grad %d, %i, %w, %dc k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>
  %2 = mt.load_balancing_loss_grad %logits, %i, %dl over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that repeat round-trips invariant operands (passed whole to every call) after the
// carried and stacked ones.
// CHECK-LABEL: func.func @repeat_invariant
// CHECK: mt.repeat @block(%{{.*}}, %{{.*}}, %{{.*}}) count 3 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
// CHECK: mt.repeat @other(%{{.*}}, %{{.*}}, %{{.*}}) count 3 {invariant = 2 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
module {
  func.func @block(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=8], f32>
  }
  func.func @other(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[layers=3, hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
      attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=8], f32>
  }
  func.func @repeat_invariant(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[layers=3, hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) {
    %0 = mt.repeat @block(%x, %w, %ids) count 3 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
    %1 = mt.repeat @other(%x, %w, %ids) count 3 {invariant = 2 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
    return
  }
}

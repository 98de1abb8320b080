// RUN: mt-opt %s -split-input-file -mt-decompose -verify-diagnostics | FileCheck %s

// Tests that under `mt.fused_attention` attention and its backward stay whole (mt-to-linalg
// lowers them to the block loops) while the other composite ops are decomposed.
module attributes {mt.fused_attention = 16 : i64} {
// CHECK-LABEL: func.func @kept
// CHECK: mt.attention %{{.*}} causal scale 2.500000e-01 save_lse
// CHECK: mt.attention_grad
// CHECK-NOT: mt.softmax
func.func @kept(%q: !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>,
                %k: !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>,
                %v: !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>,
                %x: !mt.tensor<[batch=2, h=4], f32>)
    -> (!mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>,
        !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>,
        !mt.tensor<[batch=2, h=4], f32>) {
  %o, %lse = mt.attention %q, %k, %v dims(seq, heads, kv, head_dim) causal scale 0.25 save_lse : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>
  %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %o saved(%o, %lse : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4], f32>) dims(seq, heads, kv, head_dim) causal scale 0.25 : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32> -> !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, kv=2, head_dim=8], f32>
  %s = mt.softmax %x over h : !mt.tensor<[batch=2, h=4], f32>
  return %o, %dq, %s : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, h=4], f32>
}
}

// -----

// Tests that a bf16 fused attention computes in f32: its operands are cast up, the op is
// kept whole on f32 tensors (stored as bf16 for the cost model) and its result cast down.
module attributes {mt.fused_attention = 16 : i64} {
// CHECK-LABEL: func.func @widened
// CHECK: %[[Q:.*]] = mt.cast %{{.*}} {mt.stored_as = bf16} : <[batch=2, seq=32, heads=4, head_dim=8], bf16> to <[batch=2, seq=32, heads=4, head_dim=8], f32>
// CHECK: %[[O:.*]] = mt.attention %[[Q]], %{{.*}}, %{{.*}} dims(seq, heads, heads, head_dim) causal scale 2.500000e-01 {mt.stored_as = bf16}
// CHECK: %[[OB:.*]] = mt.cast %[[O]] {mt.stored_as = bf16} : <[batch=2, seq=32, heads=4, head_dim=8], f32> to <[batch=2, seq=32, heads=4, head_dim=8], bf16>
// CHECK: return %[[OB]]
func.func @widened(%q: !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16>)
    -> !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16> {
  %o = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.25 : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16>
  return %o : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], bf16>
}
}

// -----

// Tests that fused attention refuses context parallelism, whose attention splits the
// sequence the block loops need whole.
// expected-error @+1 {{fused attention (--fused-attention) does not support context parallelism (cp 2)}}
module attributes {mt.fused_attention = 16 : i64, mt.parallel = #mt.parallel<cp = 2>} {
func.func @context_parallel(%q: !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>)
    -> !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32> {
  %o = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.25 : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>
  return %o : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>
}
}

// -----

// Tests that fused attention within documents (--reset-attention-mask) stays whole with its
// document positions: mt-to-linalg's block loops mask by them.
module attributes {mt.fused_attention = 16 : i64} {
// CHECK-LABEL: func.func @documents(
// CHECK-SAME: %[[Q:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=32], i32>)
// CHECK: mt.attention %[[Q]], %[[Q]], %[[Q]] positions %[[IDS]] dims(seq, heads, heads, head_dim) causal
func.func @documents(%q: !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, %ids: !mt.tensor<[batch=2, seq=32], i32>)
    -> !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32> {
  %o = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.25 : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>, !mt.tensor<[batch=2, seq=32], i32>
  return %o : !mt.tensor<[batch=2, seq=32, heads=4, head_dim=8], f32>
}
}

// RUN: mt-opt %s -split-input-file -mt-decompose -verify-diagnostics | FileCheck %s

// Tests that softmax becomes the stable form: the maximum is subtracted before
// exponentiating and the exponentials are divided by their sum.
func.func @softmax(%x: !mt.tensor<[b=2, n=5], f32>) -> !mt.tensor<[b=2, n=5], f32> {
  %0 = mt.softmax %x over n : !mt.tensor<[b=2, n=5], f32>
  return %0 : !mt.tensor<[b=2, n=5], f32>
}
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: mt.softmax
// CHECK: %[[MAX:.*]] = mt.reduce_max %[[X:.*]] over [n] : <[b=2, n=5], f32> -> <[b=2], f32>
// CHECK: %[[SHIFT:.*]] = mt.sub %[[X]], %[[MAX]]
// CHECK: %[[E:.*]] = mt.exp %[[SHIFT]]
// CHECK: %[[SUM:.*]] = mt.reduce_sum %[[E]] over [n]
// CHECK: %[[P:.*]] = mt.div %[[E]], %[[SUM]] : <[b=2, n=5], f32>, <[b=2], f32> -> <[b=2, n=5], f32>
// CHECK-NOT: mt.softmax
// CHECK: return %[[P]]

// -----

// Tests that layer_norm with a bias uses the biased variance with eps inside the square
// root, then the scale and the bias.
func.func @layer_norm(%x: !mt.tensor<[b=2, h=4], f32>, %g: !mt.tensor<[h=4], f32>, %bias: !mt.tensor<[h=4], f32>) -> !mt.tensor<[b=2, h=4], f32> {
  %0 = mt.layer_norm %x, %g, %bias over h {epsilon = 1.0e-05 : f64} : !mt.tensor<[b=2, h=4], f32>, !mt.tensor<[h=4], f32>, !mt.tensor<[h=4], f32> -> !mt.tensor<[b=2, h=4], f32>
  return %0 : !mt.tensor<[b=2, h=4], f32>
}
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[G:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[B:[^:]*]]:
// CHECK-NOT: mt.layer_norm
// CHECK: %[[MEAN:.*]] = mt.reduce_mean %[[X]] over [h]
// CHECK: %[[C:.*]] = mt.sub %[[X]], %[[MEAN]]
// CHECK: %[[SQ:.*]] = mt.mul %[[C]], %[[C]]
// CHECK: %[[VAR:.*]] = mt.reduce_mean %[[SQ]] over [h]
// CHECK: %[[EPS:.*]] = mt.constant 1.000000e-05 : <[], f32>
// CHECK: %[[VE:.*]] = mt.add %[[VAR]], %[[EPS]]
// CHECK: %[[INV:.*]] = mt.rsqrt %[[VE]]
// CHECK: %[[N:.*]] = mt.mul %[[C]], %[[INV]]
// CHECK: %[[S:.*]] = mt.mul %[[N]], %[[G]]
// CHECK: %[[Y:.*]] = mt.add %[[S]], %[[B]]
// CHECK: return %[[Y]]

// -----

// Tests that layer_norm without a bias ends with the scale.
func.func @layer_norm_no_bias(%x: !mt.tensor<[h=4, b=2], f64>, %g: !mt.tensor<[h=4], f64>) -> !mt.tensor<[h=4, b=2], f64> {
  %0 = mt.layer_norm %x, %g over h : !mt.tensor<[h=4, b=2], f64>, !mt.tensor<[h=4], f64> -> !mt.tensor<[h=4, b=2], f64>
  return %0 : !mt.tensor<[h=4, b=2], f64>
}
// CHECK-LABEL: func.func @layer_norm_no_bias(
// CHECK-NOT: mt.layer_norm
// CHECK: mt.rsqrt
// CHECK: %[[Y:.*]] = mt.mul %{{.*}}, %{{.*}} : <[h=4, b=2], f64>, <[h=4], f64> -> <[h=4, b=2], f64>
// CHECK-NEXT: return %[[Y]]

// -----

// Tests that rms_norm divides by the root mean square (eps inside the square root) and
// scales.
func.func @rms_norm(%x: !mt.tensor<[b=2, h=4], f32>, %g: !mt.tensor<[h=4], f32>) -> !mt.tensor<[b=2, h=4], f32> {
  %0 = mt.rms_norm %x, %g over h : !mt.tensor<[b=2, h=4], f32>, !mt.tensor<[h=4], f32> -> !mt.tensor<[b=2, h=4], f32>
  return %0 : !mt.tensor<[b=2, h=4], f32>
}
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[G:[^:]*]]:
// CHECK-NOT: mt.rms_norm
// CHECK: %[[SQ:.*]] = mt.mul %[[X]], %[[X]]
// CHECK: %[[MS:.*]] = mt.reduce_mean %[[SQ]] over [h]
// CHECK: %[[EPS:.*]] = mt.constant 9.9999999999999995E-7
// CHECK: %[[ME:.*]] = mt.add %[[MS]], %[[EPS]]
// CHECK: %[[INV:.*]] = mt.rsqrt %[[ME]]
// CHECK: %[[N:.*]] = mt.mul %[[X]], %[[INV]]
// CHECK: %[[Y:.*]] = mt.mul %[[N]], %[[G]]
// CHECK: return %[[Y]]

// -----

// Tests that non-causal multi-head attention renames the key and value sequence to seq_kv,
// contracts over head_dim, scales, takes the softmax over seq_kv, contracts with the value
// over it and transposes back to the query's layout.
func.func @attention(%q: !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>, %k: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>, %v: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>) -> !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64> {
  %0 = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) scale 0.8 : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>, !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>, !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>
  return %0 : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>
}
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[K:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[V:[^:]*]]:
// CHECK-NOT: mt.attention
// CHECK-DAG: %[[KR:.*]] = mt.rename %[[K]] seq to seq_kv : <[seq=4, heads=2, batch=2, head_dim=3], f64> -> <[seq_kv=4, heads=2, batch=2, head_dim=3], f64>
// CHECK-DAG: %[[VR:.*]] = mt.rename %[[V]] seq to seq_kv
// CHECK: %[[S:.*]] = mt.contract %[[Q]], %[[KR]] over [head_dim] : {{.*}} -> <[heads=2, seq=2, batch=2, seq_kv=4], f64>
// CHECK: %[[SCALE:.*]] = mt.constant 8.000000e-01
// CHECK: %[[SS:.*]] = mt.mul %[[S]], %[[SCALE]]
// CHECK-NOT: mt.iota
// CHECK: %[[MAX:.*]] = mt.reduce_max %[[SS]] over [seq_kv]
// CHECK: mt.exp
// CHECK: mt.reduce_sum {{.*}} over [seq_kv]
// CHECK: %[[P:.*]] = mt.div
// CHECK: %[[O:.*]] = mt.contract %[[P]], %[[VR]] over [seq_kv] : {{.*}} -> <[heads=2, seq=2, batch=2, head_dim=3], f64>
// CHECK: %[[OT:.*]] = mt.transpose %[[O]] : <[heads=2, seq=2, batch=2, head_dim=3], f64> to <[head_dim=3, heads=2, seq=2, batch=2], f64>
// CHECK-NOT: mt.attention
// CHECK: return %[[OT]]

// -----

// Tests that causal grouped-query attention splits the query's heads into
// (kv_heads, heads_group), adds the causal bias built from iota positions (a large
// negative value where the key position exceeds the query position) and merges the heads
// back.
func.func @attention_gqa_causal(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, %v: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32> {
  %0 = mt.attention %q, %k, %v dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>
  return %0 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>
}
// CHECK-LABEL: func.func @attention_gqa_causal(
// CHECK-SAME: %[[Q:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[K:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[V:[^:]*]]:
// CHECK-NOT: mt.attention
// CHECK: %[[KR:.*]] = mt.rename %[[K]] seq to seq_kv
// CHECK: %[[VR:.*]] = mt.rename %[[V]] seq to seq_kv
// CHECK: %[[QS:.*]] = mt.split %[[Q]] heads into [kv_heads, heads_group] : <[batch=2, seq=4, heads=4, head_dim=2], f32> -> <[batch=2, seq=4, kv_heads=2, heads_group=2, head_dim=2], f32>
// CHECK: %[[S:.*]] = mt.contract %[[QS]], %[[KR]] over [head_dim] : {{.*}} -> <[batch=2, seq=4, kv_heads=2, heads_group=2, seq_kv=4], f32>
// CHECK: %[[SS:.*]] = mt.mul %[[S]], %{{.*}}
// CHECK: %[[QPOS:.*]] = mt.iota dim seq : <[seq=4], f32>
// CHECK: %[[KPOS:.*]] = mt.rename %[[QPOS]] seq to seq_kv
// CHECK: %[[MASK:.*]] = mt.greater %[[KPOS]], %[[QPOS]] : <[seq_kv=4], f32>, <[seq=4], f32> -> <[seq_kv=4, seq=4], f32>
// CHECK-NOT: mt.cast
// CHECK: %[[NEG:.*]] = mt.constant -1.7014117331926443E+38 : <[], f32>
// CHECK: %[[BIAS:.*]] = mt.mul %[[MASK]], %[[NEG]]
// CHECK: %[[MASKED:.*]] = mt.add %[[SS]], %[[BIAS]] : <[batch=2, seq=4, kv_heads=2, heads_group=2, seq_kv=4], f32>, <[seq_kv=4, seq=4], f32>
// CHECK: mt.reduce_max %[[MASKED]] over [seq_kv]
// CHECK: %[[P:.*]] = mt.div
// CHECK: %[[O:.*]] = mt.contract %[[P]], %[[VR]] over [seq_kv]
// CHECK: %[[OM:.*]] = mt.merge %[[O]] [kv_heads, heads_group] into heads : <[batch=2, seq=4, kv_heads=2, heads_group=2, head_dim=2], f32> -> <[batch=2, seq=4, heads=4, head_dim=2], f32>
// CHECK-NOT: mt.attention
// CHECK: return %[[OM]]

// -----

// Tests that a bf16 attention is computed in f32 (mixed precision): its operands are cast
// to f32, the causal positions compared in f32 (bf16 is exact only up to 256), the scores,
// softmax and products in f32, and only the output is cast back to bf16. Every op of the
// decomposition but the positions (constants) says that its f32 is stored as bf16 between
// kernels (`mt.stored_as`, what the cost model counts its bytes by).
func.func @attention_causal_long_bf16(%q: !mt.tensor<[seq=300, heads=1, head_dim=2], bf16>) -> !mt.tensor<[seq=300, heads=1, head_dim=2], bf16> {
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=300, heads=1, head_dim=2], bf16>, !mt.tensor<[seq=300, heads=1, head_dim=2], bf16>, !mt.tensor<[seq=300, heads=1, head_dim=2], bf16>
  return %0 : !mt.tensor<[seq=300, heads=1, head_dim=2], bf16>
}
// CHECK-LABEL: func.func @attention_causal_long_bf16(
// CHECK-SAME: %[[Q:.*]]: !mt.tensor
// CHECK: %[[QW:.*]] = mt.cast %[[Q]] {mt.stored_as = bf16} : <[seq=300, heads=1, head_dim=2], bf16> to <[seq=300, heads=1, head_dim=2], f32>
// CHECK-NOT: bf16>
// CHECK: %[[QPOS:.*]] = mt.iota dim seq : <[seq=300], f32>
// CHECK: %[[KPOS:.*]] = mt.rename %[[QPOS]] seq to seq_kv {mt.stored_as = bf16}
// CHECK: %[[MASK:.*]] = mt.greater %[[KPOS]], %[[QPOS]] {mt.stored_as = bf16} : <[seq_kv=300], f32>, <[seq=300], f32> -> <[seq_kv=300, seq=300], f32>
// CHECK-NOT: bf16>
// CHECK: %[[O:.*]] = mt.contract {{.*}} over [seq_kv] {mt.stored_as = bf16} {{.*}} -> <[seq=300, heads=1, head_dim=2], f32>
// CHECK: %[[OB:.*]] = mt.cast %[[O]] {mt.stored_as = bf16} : <[seq=300, heads=1, head_dim=2], f32> to <[seq=300, heads=1, head_dim=2], bf16>
// CHECK: return %[[OB]]

// -----

// Tests that a bf16 layer norm computes its statistics in f32 and rounds only its result;
// its ops are marked as stored in bf16.
func.func @layer_norm_bf16(%x: !mt.tensor<[seq=4, hidden=8], bf16>, %g: !mt.tensor<[hidden=8], bf16>) -> !mt.tensor<[seq=4, hidden=8], bf16> {
  %0 = mt.layer_norm %x, %g over hidden {epsilon = 1.0e-05 : f64} : !mt.tensor<[seq=4, hidden=8], bf16>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[seq=4, hidden=8], bf16>
  return %0 : !mt.tensor<[seq=4, hidden=8], bf16>
}
// CHECK-LABEL: func.func @layer_norm_bf16(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[seq=4, hidden=8], bf16>, %[[G:[^:]*]]: !mt.tensor
// CHECK-DAG: %[[XW:.*]] = mt.cast %[[X]] {mt.stored_as = bf16} : <[seq=4, hidden=8], bf16> to <[seq=4, hidden=8], f32>
// CHECK-DAG: %[[GW:.*]] = mt.cast %[[G]] {mt.stored_as = bf16} : <[hidden=8], bf16> to <[hidden=8], f32>
// CHECK: %[[MEAN:.*]] = mt.reduce_mean %[[XW]] over [hidden] {mt.stored_as = bf16} : <[seq=4, hidden=8], f32>
// CHECK: mt.reduce_mean {{.*}} over [hidden] {mt.stored_as = bf16} : <[seq=4, hidden=8], f32>
// CHECK: %[[Y:.*]] = mt.mul %{{.*}}, %[[GW]] {mt.stored_as = bf16} : <[seq=4, hidden=8], f32>, <[hidden=8], f32>
// CHECK: %[[YB:.*]] = mt.cast %[[Y]] {mt.stored_as = bf16} : <[seq=4, hidden=8], f32> to <[seq=4, hidden=8], bf16>
// CHECK: return %[[YB]]

// -----

// Tests that the new dimensions get names that clash with no dimension of the operands.
func.func @attention_fresh_names(%q: !mt.tensor<[seq_kv=2, heads_group=2, seq=3, heads=4, head_dim=2], f64>, %k: !mt.tensor<[seq_kv=2, heads_group=2, seq=3, kv=2, head_dim=2], f64>, %v: !mt.tensor<[seq_kv=2, heads_group=2, seq=3, kv=2, head_dim=2], f64>) -> !mt.tensor<[seq_kv=2, heads_group=2, seq=3, heads=4, head_dim=2], f64> {
  %0 = mt.attention %q, %k, %v dims(seq, heads, kv, head_dim) scale 0.5 : !mt.tensor<[seq_kv=2, heads_group=2, seq=3, heads=4, head_dim=2], f64>, !mt.tensor<[seq_kv=2, heads_group=2, seq=3, kv=2, head_dim=2], f64>, !mt.tensor<[seq_kv=2, heads_group=2, seq=3, kv=2, head_dim=2], f64>
  return %0 : !mt.tensor<[seq_kv=2, heads_group=2, seq=3, heads=4, head_dim=2], f64>
}
// CHECK-LABEL: func.func @attention_fresh_names(
// CHECK: mt.rename %{{.*}} seq to seq_kv_2
// CHECK: mt.split %{{.*}} heads into [kv, heads_group_2]
// CHECK: mt.merge %{{.*}} [kv, heads_group_2] into heads

// -----

// Tests that attention_grad recomputes the probabilities and builds the textbook backward:
// dv and dk contract over the query's sequence and group (summing over the query heads of
// a key/value head), dq over seq_kv; dk and dv are renamed and transposed back.
func.func @attention_grad(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, %v: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, %do: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>) -> (!mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>) {
  %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32> -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>
  return %dq, %dk, %dv : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f32>
}
// CHECK-LABEL: func.func @attention_grad(
// CHECK-SAME: %[[Q:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[K:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[V:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[DO:[^:]*]]:
// CHECK-NOT: mt.attention_grad
// CHECK: %[[KR:.*]] = mt.rename %[[K]] seq to seq_kv
// CHECK: %[[VR:.*]] = mt.rename %[[V]] seq to seq_kv
// CHECK: %[[QS:.*]] = mt.split %[[Q]] heads into [kv_heads, heads_group]
// CHECK: mt.iota dim seq
// CHECK: %[[P:.*]] = mt.div
// CHECK: %[[DOS:.*]] = mt.split %[[DO]] heads into [kv_heads, heads_group]
// CHECK: %[[DV:.*]] = mt.contract %[[P]], %[[DOS]] over [seq, heads_group] : {{.*}} -> <[batch=2, kv_heads=2, seq_kv=4, head_dim=2], f32>
// CHECK: %[[DP:.*]] = mt.contract %[[DOS]], %[[VR]] over [head_dim] : {{.*}} -> <[batch=2, seq=4, kv_heads=2, heads_group=2, seq_kv=4], f32>
// CHECK: %[[DPP:.*]] = mt.mul %[[DP]], %[[P]]
// CHECK: %[[ROW:.*]] = mt.reduce_sum %[[DPP]] over [seq_kv]
// CHECK: %[[CENTRED:.*]] = mt.sub %[[DP]], %[[ROW]]
// CHECK: %[[DS0:.*]] = mt.mul %[[P]], %[[CENTRED]]
// CHECK: %[[SCALE:.*]] = mt.constant 5.000000e-01
// CHECK: %[[DS:.*]] = mt.mul %[[DS0]], %[[SCALE]]
// CHECK: %[[DQ:.*]] = mt.contract %[[DS]], %[[KR]] over [seq_kv] : {{.*}} -> <[batch=2, seq=4, kv_heads=2, heads_group=2, head_dim=2], f32>
// CHECK: %[[DK:.*]] = mt.contract %[[DS]], %[[QS]] over [seq, heads_group] : {{.*}} -> <[batch=2, kv_heads=2, seq_kv=4, head_dim=2], f32>
// CHECK: %[[DQM:.*]] = mt.merge %[[DQ]] [kv_heads, heads_group] into heads
// CHECK: %[[DKR:.*]] = mt.rename %[[DK]] seq_kv to seq
// CHECK: %[[DKT:.*]] = mt.transpose %[[DKR]] : <[batch=2, kv_heads=2, seq=4, head_dim=2], f32> to <[batch=2, seq=4, kv_heads=2, head_dim=2], f32>
// CHECK: %[[DVR:.*]] = mt.rename %[[DV]] seq_kv to seq
// CHECK: %[[DVT:.*]] = mt.transpose %[[DVR]]
// CHECK-NOT: mt.attention_grad
// CHECK: return %[[DQM]], %[[DKT]], %[[DVT]]

// -----

// Tests that cross_entropy becomes the mean of logsumexp (stable form) minus the picked
// logit, which is the sum of the logits times the one-hot of the labels; the one-hot is
// topk_grad scattering ones at the labels along a unit dimension v_label.
func.func @cross_entropy(%x: !mt.tensor<[b=2, s=3, v=5], f32>, %l: !mt.tensor<[b=2, s=3], i32>) -> !mt.tensor<[], f32> {
  %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[b=2, s=3, v=5], f32>, !mt.tensor<[b=2, s=3], i32> -> !mt.tensor<[], f32>
  return %0 : !mt.tensor<[], f32>
}
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[L:[^:]*]]:
// CHECK-NOT: mt.cross_entropy
// CHECK: %[[MAX:.*]] = mt.reduce_max %[[X]] over [v]
// CHECK: %[[SHIFT:.*]] = mt.sub %[[X]], %[[MAX]]
// CHECK: %[[E:.*]] = mt.exp %[[SHIFT]]
// CHECK: %[[SUM:.*]] = mt.reduce_sum %[[E]] over [v]
// CHECK: %[[LOG:.*]] = mt.log %[[SUM]]
// CHECK: %[[LSE:.*]] = mt.add %[[LOG]], %[[MAX]]
// CHECK: %[[ONE:.*]] = mt.constant 1.000000e+00
// CHECK: %[[ONES:.*]] = mt.broadcast %[[ONE]] : <[], f32> to <[b=2, s=3, v_label=1], f32>
// CHECK: %[[IDX:.*]] = mt.broadcast %[[L]] : <[b=2, s=3], i32> to <[b=2, s=3, v_label=1], i32>
// CHECK: %[[HOT:.*]] = mt.topk_grad %[[ONES]], %[[IDX]] over v k v_label : {{.*}} -> <[b=2, s=3, v=5], f32>
// CHECK: %[[XH:.*]] = mt.mul %[[X]], %[[HOT]]
// CHECK: %[[PICKED:.*]] = mt.reduce_sum %[[XH]] over [v]
// CHECK: %[[NLL:.*]] = mt.sub %[[LSE]], %[[PICKED]]
// CHECK: %[[LOSS:.*]] = mt.reduce_mean %[[NLL]] over [b, s] : <[b=2, s=3], f32> -> <[], f32>
// CHECK-NOT: mt.cross_entropy
// CHECK: return %[[LOSS]]

// -----

// Tests that cross_entropy with a mask becomes the sum of the masked per-position losses
// over the sum of the mask, that sum kept at least 1.
func.func @cross_entropy_masked(%x: !mt.tensor<[b=2, s=3, v=5], f32>, %l: !mt.tensor<[b=2, s=3], i32>, %m: !mt.tensor<[b=2, s=3], f32>) -> !mt.tensor<[], f32> {
  %0 = mt.cross_entropy %x, %l mask %m over v : !mt.tensor<[b=2, s=3, v=5], f32>, !mt.tensor<[b=2, s=3], i32>, !mt.tensor<[b=2, s=3], f32> -> !mt.tensor<[], f32>
  return %0 : !mt.tensor<[], f32>
}
// CHECK-LABEL: func.func @cross_entropy_masked(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[L:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[M:[^:]*]]:
// CHECK-NOT: mt.cross_entropy
// CHECK: %[[NLL:.*]] = mt.sub %{{.*}}, %{{.*}} : <[b=2, s=3], f32>, <[b=2, s=3], f32>
// CHECK: %[[W:.*]] = mt.mul %[[NLL]], %[[M]]
// CHECK: %[[TOTAL:.*]] = mt.reduce_sum %[[W]] over [b, s] : <[b=2, s=3], f32> -> <[], f32>
// CHECK: %[[COUNT:.*]] = mt.reduce_sum %[[M]] over [b, s] : <[b=2, s=3], f32> -> <[], f32>
// CHECK: %[[ONE:.*]] = mt.constant 1.000000e+00
// CHECK: %[[DEN:.*]] = mt.max %[[COUNT]], %[[ONE]]
// CHECK: %[[LOSS:.*]] = mt.div %[[TOTAL]], %[[DEN]]
// CHECK-NOT: mt.cross_entropy
// CHECK: return %[[LOSS]]

// -----

// Tests that cross_entropy_grad with a mask weighs (softmax - one-hot) by mask * loss_grad /
// max(sum(mask), 1).
func.func @cross_entropy_grad_masked(%x: !mt.tensor<[b=2, s=3, v=5], f32>, %l: !mt.tensor<[b=2, s=3], i32>, %g: !mt.tensor<[], f32>, %m: !mt.tensor<[b=2, s=3], f32>) -> !mt.tensor<[b=2, s=3, v=5], f32> {
  %0 = mt.cross_entropy_grad %x, %l, %g mask %m over v : !mt.tensor<[b=2, s=3, v=5], f32>, !mt.tensor<[b=2, s=3], i32>, !mt.tensor<[], f32>, !mt.tensor<[b=2, s=3], f32> -> !mt.tensor<[b=2, s=3, v=5], f32>
  return %0 : !mt.tensor<[b=2, s=3, v=5], f32>
}
// CHECK-LABEL: func.func @cross_entropy_grad_masked(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[L:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[G:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[M:[^:]*]]:
// CHECK-NOT: mt.cross_entropy_grad
// CHECK: %[[COUNT:.*]] = mt.reduce_sum %[[M]] over [b, s]
// CHECK: %[[ONE:.*]] = mt.constant 1.000000e+00
// CHECK: %[[DEN:.*]] = mt.max %[[COUNT]], %[[ONE]]
// CHECK: %[[SCALE:.*]] = mt.div %[[G]], %[[DEN]]
// CHECK: %[[FACTOR:.*]] = mt.mul %[[M]], %[[SCALE]]
// CHECK: %[[D:.*]] = mt.sub %{{.*}}, %{{.*}} : <[b=2, s=3, v=5], f32>, <[b=2, s=3, v=5], f32>
// CHECK: %[[R:.*]] = mt.mul %[[D]], %[[FACTOR]]
// CHECK-NOT: mt.cross_entropy_grad
// CHECK: return %[[R]]

// -----

// Tests that cross_entropy_grad is (softmax - one-hot) * loss_grad / positions, with the
// labels' dimensions in another order than the logits'.
func.func @cross_entropy_grad(%x: !mt.tensor<[b=2, v=5, s=3], f32>, %l: !mt.tensor<[s=3, b=2], i32>, %g: !mt.tensor<[], f32>) -> !mt.tensor<[b=2, v=5, s=3], f32> {
  %0 = mt.cross_entropy_grad %x, %l, %g over v : !mt.tensor<[b=2, v=5, s=3], f32>, !mt.tensor<[s=3, b=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[b=2, v=5, s=3], f32>
  return %0 : !mt.tensor<[b=2, v=5, s=3], f32>
}
// CHECK-LABEL: func.func @cross_entropy_grad(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[L:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[G:[^:]*]]:
// CHECK-NOT: mt.cross_entropy_grad
// CHECK: %[[POS:.*]] = mt.constant 6.000000e+00
// CHECK: %[[FACTOR:.*]] = mt.div %[[G]], %[[POS]]
// CHECK: mt.reduce_max %[[X]] over [v]
// CHECK: %[[P:.*]] = mt.div
// CHECK: %[[ONES:.*]] = mt.broadcast %{{.*}} : <[], f32> to <[b=2, v_label=1, s=3], f32>
// CHECK: %[[IDX:.*]] = mt.broadcast %[[L]] : <[s=3, b=2], i32> to <[s=3, b=2, v_label=1], i32>
// CHECK: %[[HOT:.*]] = mt.topk_grad %[[ONES]], %[[IDX]] over v k v_label : {{.*}} -> <[b=2, v=5, s=3], f32>
// CHECK: %[[D:.*]] = mt.sub %[[P]], %[[HOT]]
// CHECK: %[[R:.*]] = mt.mul %[[D]], %[[FACTOR]]
// CHECK-NOT: mt.cross_entropy_grad
// CHECK: return %[[R]]

// -----

// Tests that z_loss becomes the mean over the positions of the square of logsumexp, in
// the stable form (the maximum subtracted before exponentiating).
func.func @z_loss(%x: !mt.tensor<[b=2, e=4, s=3], f32>) -> !mt.tensor<[], f32> {
  %0 = mt.z_loss %x over e : !mt.tensor<[b=2, e=4, s=3], f32> -> !mt.tensor<[], f32>
  return %0 : !mt.tensor<[], f32>
}
// CHECK-LABEL: func.func @z_loss(
// CHECK-SAME: %[[X:[^:]*]]:
// CHECK-NOT: mt.z_loss
// CHECK: %[[MAX:.*]] = mt.reduce_max %[[X]] over [e]
// CHECK: %[[SHIFT:.*]] = mt.sub %[[X]], %[[MAX]]
// CHECK: %[[E:.*]] = mt.exp %[[SHIFT]]
// CHECK: %[[SUM:.*]] = mt.reduce_sum %[[E]] over [e]
// CHECK: %[[LOG:.*]] = mt.log %[[SUM]]
// CHECK: %[[LSE:.*]] = mt.add %[[LOG]], %[[MAX]]
// CHECK: %[[SQ:.*]] = mt.mul %[[LSE]], %[[LSE]]
// CHECK: %[[LOSS:.*]] = mt.reduce_mean %[[SQ]] over [b, s] : <[b=2, s=3], f32> -> <[], f32>
// CHECK-NOT: mt.z_loss
// CHECK: return %[[LOSS]]

// -----

// Tests that ops without a composition are left alone.
func.func @untouched(%x: !mt.tensor<[b=2, h=4], f32>) -> !mt.tensor<[b=2, h=4], f32> {
  %0 = mt.gelu %x : !mt.tensor<[b=2, h=4], f32>
  %1 = mt.dropout %0 rate 1.000000e-01 stream 3 : !mt.tensor<[b=2, h=4], f32>
  return %1 : !mt.tensor<[b=2, h=4], f32>
}
// CHECK-LABEL: func.func @untouched(
// CHECK-NEXT: mt.gelu
// CHECK-NEXT: mt.dropout
// CHECK-NEXT: return

// -----

// Tests that under ring attention (cp 2, cp_comm_type p2p) attention and its backward stay
// whole for their partition rule, while the other composite ops are decomposed.
// CHECK-LABEL: func.func @ring_attention(
// CHECK: mt.attention
// CHECK: mt.attention_grad
// CHECK-NOT: mt.softmax
module attributes {mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @ring_attention(%q: !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, %do: !mt.tensor<[seq=4, heads=2, head_dim=2], f32>) -> (!mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>) {
    %o = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
    %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %do dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
    %s = mt.softmax %o over head_dim : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
    return %s, %dk, %dv : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that attention saving its log-sum-exp (save_lse) gives the stable softmax's row
// maximum plus the log of its sum, next to the output.
func.func @attention_lse(%q: !mt.tensor<[seq=2, heads=2, head_dim=3], f64>) -> (!mt.tensor<[seq=2, heads=2, head_dim=3], f64>, !mt.tensor<[seq=2, heads=2], f64>) {
  %0, %1 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) scale 0.8 save_lse : !mt.tensor<[seq=2, heads=2, head_dim=3], f64>, !mt.tensor<[seq=2, heads=2, head_dim=3], f64>, !mt.tensor<[seq=2, heads=2, head_dim=3], f64>
  return %0, %1 : !mt.tensor<[seq=2, heads=2, head_dim=3], f64>, !mt.tensor<[seq=2, heads=2], f64>
}
// CHECK-LABEL: func.func @attention_lse(
// CHECK-NOT: mt.attention
// CHECK: %[[MAX:.*]] = mt.reduce_max %{{.*}} over [seq_kv]
// CHECK: %[[E:.*]] = mt.exp
// CHECK: %[[SUM:.*]] = mt.reduce_sum %[[E]] over [seq_kv]
// CHECK: %[[O:.*]] = mt.div %{{.*}}, %[[SUM]]
// CHECK: %[[LOG:.*]] = mt.log %[[SUM]]
// CHECK: %[[LSE:.*]] = mt.add %[[MAX]], %[[LOG]] : {{.*}} -> <[seq=2, heads=2], f64>
// CHECK: return %{{.*}}, %{{.*}}

// -----

// Tests that attention with document positions (--reset-attention-mask) adds the document
// term to the causal mask: the keys before the query's document start (its position minus
// its id, in the iota's type) are masked too, the two disjoint 0/1 masks summed under one
// bias.
func.func @attention_documents(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4], i32>
  return %0 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
}
// CHECK-LABEL: func.func @attention_documents(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<{{[^>]*}}>, %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: %[[SS:.*]] = mt.mul %{{.*}} : <[batch=2, seq=4, heads=2, seq_kv=4], f32>, <[], f32>
// CHECK: %[[QPOS:.*]] = mt.iota dim seq : <[seq=4], f32>
// CHECK: %[[KPOS:.*]] = mt.rename %[[QPOS]] seq to seq_kv
// CHECK: %[[CAUSAL:.*]] = mt.greater %[[KPOS]], %[[QPOS]]
// CHECK: %[[FIDS:.*]] = mt.cast %[[IDS]] : <[batch=2, seq=4], i32> to <[batch=2, seq=4], f32>
// CHECK: %[[START:.*]] = mt.sub %[[QPOS]], %[[FIDS]] : <[seq=4], f32>, <[batch=2, seq=4], f32> -> <[seq=4, batch=2], f32>
// CHECK: %[[BEFORE:.*]] = mt.greater %[[START]], %[[KPOS]] : <[seq=4, batch=2], f32>, <[seq_kv=4], f32> -> <[seq=4, batch=2, seq_kv=4], f32>
// CHECK: %[[MASK:.*]] = mt.add %[[CAUSAL]], %[[BEFORE]]
// CHECK: %[[BIAS:.*]] = mt.mul %[[MASK]], %{{.*}}
// CHECK: mt.add %[[SS]], %[[BIAS]] : <[batch=2, seq=4, heads=2, seq_kv=4], f32>, <[seq_kv=4, seq=4, batch=2], f32>
// CHECK-NOT: mt.attention

// -----

// Tests that attention_grad with document positions recomputes the probabilities under the
// same document mask.
func.func @attention_grad_documents(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
  %0:3 = mt.attention_grad %q, %q, %q, %q positions %ids : !mt.tensor<[batch=2, seq=4], i32> dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  return %0#0 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
}
// CHECK-LABEL: func.func @attention_grad_documents(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<{{[^>]*}}>, %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: %[[FIDS:.*]] = mt.cast %[[IDS]] : <[batch=2, seq=4], i32> to <[batch=2, seq=4], f32>
// CHECK: mt.sub %{{.*}}, %[[FIDS]]
// CHECK-NOT: mt.attention_grad

// -----

// Tests that ring attention leaves attention with document positions whole, as without
// them: its partition rule builds the block steps with the document mask (mtp-partition).
// CHECK-LABEL: func.func @ring_documents(
// CHECK-SAME: %[[Q:[^:]*]]: !mt.tensor<{{[^>]*}}>, %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.attention %[[Q]], %[[Q]], %[[Q]] positions %[[IDS]] dims(seq, heads, heads, head_dim) causal
module attributes {mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
func.func @ring_documents(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=2, seq=4], i32>
  return %0 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
}
}

// RUN: mt-opt %s -split-input-file -mt-autodiff | FileCheck %s
// RUN: mt-opt %s -split-input-file -mt-autodiff=recompute=full | FileCheck %s --check-prefix=FULL
// RUN: mt-opt %s -split-input-file -mt-autodiff=recompute=selective | FileCheck %s --check-prefix=SEL

// Tests that a model without layers gets forward_backward returning the loss and one
// gradient per parameter, with a tied parameter's two uses summed.
module @tied {
  mt.param @w : !mt.tensor<[vocab=16, hidden=8], f32> init normal(2.000000e-02)
  func.func @forward(%t: !mt.tensor<[batch=2, seq=4], i32>, %l: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[vocab=16, hidden=8], f32>
    %x = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %y = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[vocab=16, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, vocab=16], f32>
    %c = mt.cross_entropy %y, %l over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @tied
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=8], f32>)
// CHECK-SAME: attributes {mt.grads = [@w]}
// CHECK: %[[LOSS:.*]] = mt.cross_entropy
// CHECK: %[[ONE:.*]] = mt.constant 1.000000e+00
// CHECK: %[[DY:.*]] = mt.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]] over vocab
// CHECK: %[[DX:.*]] = mt.contract %[[DY]], %{{.*}} over [vocab]
// CHECK: %[[DW1:.*]] = mt.contract %[[DY]], %{{.*}} over [batch, seq]
// CHECK: %[[DW2:.*]] = mt.embedding_grad %{{.*}}, %[[DX]] over vocab
// CHECK: %[[DW:.*]] = mt.add %[[DW1]], %[[DW2]]
// CHECK: return %[[LOSS]], %[[DW]]

// -----

// Tests that a repeated layer is split into @L.fwd, which returns the values its backward
// reads, and @L.bwd, which the entry applies in reverse; layer parameter gradients keep the
// stacking dimension and a model parameter read inside the layer sums over it.
module @layered {
  mt.param @s : !mt.tensor<[hidden=8], f32> init ones
  mt.param @block.w layer @block : !mt.tensor<[hidden=8, ffn=16], f32> init normal(2.000000e-02)
  mt.param @block.v layer @block : !mt.tensor<[ffn=16, hidden=8], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=8, ffn=16], f32>
    %v = mt.param_ref @block.v : !mt.tensor<[ffn=16, hidden=8], f32>
    %s = mt.param_ref @s : !mt.tensor<[hidden=8], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[batch=2, ffn=16], f32>
    %g = mt.tanh %h : !mt.tensor<[batch=2, ffn=16], f32>
    %o = mt.contract %g, %v over [ffn] : !mt.tensor<[batch=2, ffn=16], f32>, !mt.tensor<[ffn=16, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
    %y = mt.mul %o, %s : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
    return %y : !mt.tensor<[batch=2, hidden=8], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 3 : (!mt.tensor<[batch=2, hidden=8], f32>) -> !mt.tensor<[batch=2, hidden=8], f32>
    %l = mt.reduce_sum %y over [batch, hidden] : !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @layered
// The saved values: the input, tanh's result (read by its VJP and by v's gradient) and o.
// CHECK-LABEL: func.func @block.fwd(
// CHECK-SAME: -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, ffn=16], f32>, !mt.tensor<[batch=2, hidden=8], f32>)
// CHECK-SAME: mt.layer_of = @block
// CHECK-LABEL: func.func @block.bwd(
// CHECK-SAME: -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32>, !mt.tensor<[ffn=16, hidden=8], f32>, !mt.tensor<[hidden=8], f32>)
// CHECK-SAME: mt.layer_of = @block, mt.param_grads = [@block.w, @block.v, @s]
// CHECK-NOT: mt.tanh
// CHECK: return
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: -> (!mt.tensor<[], f32>, !mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8, ffn=16], f32>, !mt.tensor<[layers=3, ffn=16, hidden=8], f32>)
// CHECK-SAME: mt.grads = [@s, @block.w, @block.v]
// CHECK: %[[FWD:.*]]:4 = mt.repeat @block.fwd(%{{.*}}) count 3 {carried = 1 : i64}
// CHECK: %[[BWD:.*]]:4 = mt.repeat @block.bwd(%{{.*}}, %[[FWD]]#1, %[[FWD]]#2, %[[FWD]]#3) count 3 {carried = 1 : i64, reverse}
// CHECK: %[[S:.*]] = mt.reduce_sum %[[BWD]]#3 over [layers]
// CHECK: return %{{.*}}, %[[S]], %[[BWD]]#1, %[[BWD]]#2

// With full recomputation only the layer input is saved, and the backward recomputes tanh.
// FULL-LABEL: module @layered
// FULL-LABEL: func.func @block.fwd(
// FULL-SAME: -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32>)
// FULL-LABEL: func.func @block.bwd(
// FULL: mt.tanh
// FULL: return

// Selective recomputation saves the same as none when there is no attention.
// SEL-LABEL: module @layered
// SEL-LABEL: func.func @block.fwd(
// SEL-SAME: -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, ffn=16], f32>, !mt.tensor<[batch=2, hidden=8], f32>)

// -----

// Tests that under mixed precision a layer's bf16 read of its f32 parameter (the cast after
// the param_ref) is recomputed in the backward, not saved: the layer saves its bf16 input
// only, and the parameter's gradient leaves through the cast's VJP in f32.
module @mixed {
  mt.param @block.w layer @block : !mt.tensor<[hidden=8], f32> init ones
  func.func @block(%x: !mt.tensor<[batch=2, hidden=8], bf16>) -> !mt.tensor<[batch=2, hidden=8], bf16> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=8], f32>
    %wb = mt.cast %w : !mt.tensor<[hidden=8], f32> to !mt.tensor<[hidden=8], bf16>
    %h = mt.mul %x, %wb : !mt.tensor<[batch=2, hidden=8], bf16>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[batch=2, hidden=8], bf16>
    return %h : !mt.tensor<[batch=2, hidden=8], bf16>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, hidden=8], bf16>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, hidden=8], bf16>) -> !mt.tensor<[batch=2, hidden=8], bf16>
    %l = mt.reduce_sum %y over [batch, hidden] : !mt.tensor<[batch=2, hidden=8], bf16> -> !mt.tensor<[], bf16>
    %f = mt.cast %l : !mt.tensor<[], bf16> to !mt.tensor<[], f32>
    return %f : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @mixed
// CHECK-LABEL: func.func @block.fwd(
// CHECK-SAME: -> (!mt.tensor<[batch=2, hidden=8], bf16>, !mt.tensor<[batch=2, hidden=8], bf16>)
// CHECK-LABEL: func.func @block.bwd(
// CHECK: %[[W:.*]] = mt.param_ref @block.w : <[hidden=8], f32>
// CHECK: mt.cast %[[W]] : <[hidden=8], f32> to <[hidden=8], bf16>
// CHECK: %[[G:.*]] = mt.cast %{{.*}} : <[hidden=8], bf16> to <[hidden=8], f32>
// CHECK: return %{{.*}}, %[[G]]

// -----

// Tests that under precision fp16 the backward starts from the runtime's loss scale
// (mt.loss_scale), not from 1, so every gradient comes out scaled by it; the loss itself is
// returned unscaled.
module @fp16 attributes {mt.train = #mt.train<precision = fp16>} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init ones
  func.func @forward(%x: !mt.tensor<[hidden=8], f16>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[hidden=8], f32>
    %wh = mt.cast %w : !mt.tensor<[hidden=8], f32> to !mt.tensor<[hidden=8], f16>
    %h = mt.mul %x, %wh : !mt.tensor<[hidden=8], f16>, !mt.tensor<[hidden=8], f16> -> !mt.tensor<[hidden=8], f16>
    %l = mt.reduce_sum %h over [hidden] : !mt.tensor<[hidden=8], f16> -> !mt.tensor<[], f16>
    %f = mt.cast %l : !mt.tensor<[], f16> to !mt.tensor<[], f32>
    return %f : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @fp16
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[LOSS:.*]] = mt.cast %{{.*}} : <[], f16> to <[], f32>
// CHECK-NEXT: %[[SCALE:.*]] = mt.loss_scale : <[], f32>
// CHECK-NEXT: mt.cast %[[SCALE]] : <[], f32> to <[], f16>
// CHECK-NOT: mt.constant
// CHECK: return %[[LOSS]], %{{.*}} : !mt.tensor<[], f32>, !mt.tensor<[hidden=8], f32>

// -----

// Tests that selective recomputation saves attention's inputs, not its output, and
// recomputes the attention in the backward.
module @attn {
  mt.param @block.w layer @block : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> init normal(2.000000e-02)
  func.func @block(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32>
    %a = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    %o = mt.contract %a, %w over [heads, head_dim] : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
    %p = mt.contract %o, %w over [hidden] : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    return %p : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    %l = mt.reduce_sum %y over [seq, heads, head_dim] : !mt.tensor<[seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @attn
// CHECK-LABEL: func.func @block.bwd(
// CHECK-NOT: mt.attention %
// CHECK: mt.attention_grad
// SEL-LABEL: module @attn
// SEL-LABEL: func.func @block.fwd(
// SEL-SAME: -> (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, hidden=8], f32>)
// SEL-LABEL: func.func @block.bwd(
// SEL: mt.attention %
// SEL: mt.attention_grad

// -----

// Tests that under ring attention (cp_comm_type p2p) the forward's attention saves its
// log-sum-exp: @block.fwd returns it among the saved values and @block.bwd hands it, with
// the attention's output, to attention_grad (no attention in the backward; selective
// recomputation recomputes both in the backward).
module @ring attributes {mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  mt.param @block.w layer @block : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> init normal(2.000000e-02)
  func.func @block(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32>
    %a = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    %o = mt.contract %a, %w over [heads, head_dim] : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
    %p = mt.contract %o, %w over [hidden] : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    return %p : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
    %l = mt.reduce_sum %y over [seq, heads, head_dim] : !mt.tensor<[seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @ring
// CHECK-LABEL: func.func @block.fwd(
// CHECK-SAME: !mt.tensor<[seq=4, heads=2], f32>
// CHECK: %[[A:.*]], %[[L:.*]] = mt.attention {{.*}} causal scale 5.000000e-01 save_lse
// CHECK: return {{.*}}%[[L]]
// CHECK-LABEL: func.func @block.bwd(
// CHECK-NOT: mt.attention %
// CHECK: mt.attention_grad {{.*}} saved(%{{.*}}, %{{.*}} : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2], f32>)
// SEL-LABEL: module @ring
// SEL-LABEL: func.func @block.bwd(
// SEL: %[[A:.*]], %[[L:.*]] = mt.attention {{.*}} save_lse
// SEL: mt.attention_grad {{.*}} saved(%[[A]], %[[L]] :

// -----

// Tests that attention within documents (its document positions an invariant operand of
// the repeat) hands the positions to attention_grad, which returns no gradient for them;
// with the forward's statistics saved (fused attention) the saving attention keeps them.
module @documents attributes {mt.fused_attention = 16 : i64} {
  mt.param @block.w layer @block : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> init normal(2.000000e-02)
  func.func @block(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[heads=2, head_dim=4, hidden=8], f32>
    %a = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4], i32>
    %o = mt.contract %a, %w over [heads, head_dim] : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, hidden=8], f32>
    %p = mt.contract %o, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[heads=2, head_dim=4, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
    return %p : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x, %ids) count 2 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
    %l = mt.reduce_sum %y over [batch, seq, heads, head_dim] : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @documents
// CHECK-LABEL: func.func @block.fwd(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %[[FIDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.attention {{.*}} positions %[[FIDS]] dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 save_lse
// CHECK-LABEL: func.func @block.bwd(
// CHECK-SAME: %[[BIDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.attention_grad {{.*}} saved({{.*}}) positions %[[BIDS]] : !mt.tensor<[batch=2, seq=4], i32> dims
// CHECK-LABEL: func.func @forward_backward(
// CHECK: mt.repeat @block.bwd({{.*}}, %arg1) count 2 {carried = 1 : i64, invariant = 1 : i64, reverse}

// -----

// Tests that a repeat's invariant operand (position ids read by rope in the layer) has no
// gradient: @L.bwd takes it last, as the forward does, rather than saving it per instance,
// returns no gradient for it, and rotates the gradient back at the same ids; the backward
// repeat passes it unchanged too. Full recomputation recomputes the rope from the ids.
module @invariant {
  mt.param @block.w layer @block : !mt.tensor<[hidden=4, head_dim=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %w = mt.param_ref @block.w : !mt.tensor<[hidden=4, head_dim=4], f32>
    %q = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=4], f32>, !mt.tensor<[hidden=4, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, head_dim=4], f32>
    %r = mt.rope %q over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, head_dim=4], f32>
    %y = mt.contract %r, %w over [head_dim] : !mt.tensor<[batch=2, seq=4, head_dim=4], f32>, !mt.tensor<[hidden=4, head_dim=4], f32> -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    return %y : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, seq=4, hidden=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %y = mt.repeat @block(%x, %ids) count 3 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [batch, seq, hidden] : !mt.tensor<[batch=2, seq=4, hidden=4], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}
// CHECK-LABEL: module @invariant
// CHECK-LABEL: func.func @block.fwd(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4, hidden=4], f32>, %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK-NOT: i32>
// CHECK-SAME: mt.layer_of = @block
// CHECK-LABEL: func.func @block.bwd(
// CHECK-SAME: %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, hidden=4], f32>, !mt.tensor<[hidden=4, head_dim=4], f32>)
// CHECK: mt.rope %{{.*}} over head_dim position seq at %[[IDS]] : !mt.tensor<[batch=2, seq=4], i32> inverse
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[batch=2, seq=4, hidden=4], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: %[[FWD:.*]]:{{[0-9]+}} = mt.repeat @block.fwd(%[[X]], %[[P]]) count 3 {carried = 1 : i64, invariant = 1 : i64}
// CHECK: mt.repeat @block.bwd(%{{.*}}, %[[P]]) count 3 {carried = 1 : i64, invariant = 1 : i64, reverse}

// FULL-LABEL: module @invariant
// FULL-LABEL: func.func @block.fwd(
// FULL-SAME: -> (!mt.tensor<[batch=2, seq=4, hidden=4], f32>, !mt.tensor<[batch=2, seq=4, hidden=4], f32>)
// FULL-LABEL: func.func @block.bwd(
// FULL-SAME: %[[IDS:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>) ->
// FULL: mt.rope %{{.*}} over head_dim position seq at %[[IDS]] : !mt.tensor<[batch=2, seq=4], i32> :
// FULL: mt.rope %{{.*}} over head_dim position seq at %[[IDS]] : !mt.tensor<[batch=2, seq=4], i32> inverse

// RUN: mt-opt %s -split-input-file -mtp-partition -verify-diagnostics | FileCheck %s

// Tests Megatron's MLP under tp 2: w1 is split along ffn (column-parallel), w2 along ffn
// (row-parallel), so the second contraction leaves partial sums, summed by exactly one
// all_reduce before the replicated bias is added; the loss's sum is replicated.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: !mt.tensor<[hidden=8, ffn=8], f32> {mt.param = @w1}
// CHECK-SAME: %arg2: !mt.tensor<[ffn=8, hidden=8], f32> {mt.param = @w2}
// CHECK: %[[H:.*]] = mt.contract %arg0, %arg1 over [hidden] : <[batch=2, hidden=8], f32>, <[hidden=8, ffn=8], f32> -> <[batch=2, ffn=8], f32>
// CHECK: %[[G:.*]] = mt.gelu %[[H]] : <[batch=2, ffn=8], f32>
// CHECK: %[[Y:.*]] = mt.contract %[[G]], %arg2 over [ffn] : <[batch=2, ffn=8], f32>, <[ffn=8, hidden=8], f32> -> <[batch=2, hidden=8], f32>
// CHECK: %[[P:.*]] = mtp.from_local %[[Y]] : <[batch=2, hidden=8], f32> -> <[batch=2, hidden=8], f32, <[tp = 2]>, partial [tp]>
// CHECK: %[[R:.*]] = mtp.all_reduce %[[P]] over ["tp"]
// CHECK: %[[L:.*]] = mtp.to_local %[[R]] : <[batch=2, hidden=8], f32, <[tp = 2]>> -> <[batch=2, hidden=8], f32>
// CHECK: mt.add %[[L]], %arg3
// CHECK-NOT: mtp.
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @w1 : !mt.tensor<[hidden=8, ffn=16], f32> init normal(2.000000e-02)
  mt.param @w2 : !mt.tensor<[ffn=16, hidden=8], f32> init normal(2.000000e-02)
  mt.param @b2 : !mt.tensor<[hidden=8], f32> init zeros
  func.func @forward(%x: !mt.tensor<[batch=2, hidden=8], f32>,
                     %w1: !mt.tensor<[hidden=8, ffn=16], f32> {mt.param = @w1},
                     %w2: !mt.tensor<[ffn=16, hidden=8], f32> {mt.param = @w2},
                     %b2: !mt.tensor<[hidden=8], f32> {mt.param = @b2}) -> !mt.tensor<[], f32> {
    %h = mt.contract %x, %w1 over [hidden] : <[batch=2, hidden=8], f32>, <[hidden=8, ffn=16], f32> -> <[batch=2, ffn=16], f32>
    %g = mt.gelu %h : <[batch=2, ffn=16], f32>
    %y = mt.contract %g, %w2 over [ffn] : <[batch=2, ffn=16], f32>, <[ffn=16, hidden=8], f32> -> <[batch=2, hidden=8], f32>
    %z = mt.add %y, %b2 : <[batch=2, hidden=8], f32>, <[hidden=8], f32> -> <[batch=2, hidden=8], f32>
    %l = mt.reduce_sum %z over [batch, hidden] : <[batch=2, hidden=8], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests context parallelism's data: the entry function's data argument arrives whole and
// each rank keeps its part of the sequence (all_slice, no communication) before the first
// op; the parameter is not split over cp; a mean over the split sequence is a partial mean,
// scaled by 1/cp and summed once.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: !mt.tensor<[batch=2, seq=8, hidden=4], f32>
// CHECK-SAME: %arg1: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @w}
// CHECK: %[[X:.*]] = mtp.from_local %arg0
// CHECK: %[[S:.*]] = mtp.all_slice %[[X]] over "cp" along "seq" {{.*}} -> <[batch=2, seq=8, hidden=4], f32, <[cp = 2]>, split {seq = [cp]}>
// CHECK: %[[L:.*]] = mtp.to_local %[[S]] {{.*}} -> <[batch=2, seq=4, hidden=4], f32>
// CHECK: mt.contract %[[L]], %arg1 over [hidden] {{.*}} -> <[batch=2, seq=4, ffn=4], f32>
// CHECK: mt.reduce_mean
// CHECK: mt.mul
// CHECK: mtp.all_reduce {{.*}} over ["cp"]
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2>} {
  mt.param @w : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=2, seq=8, hidden=4], f32>,
                     %w: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @w}) -> !mt.tensor<[], f32> {
    %h = mt.contract %x, %w over [hidden] : <[batch=2, seq=8, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=8, ffn=4], f32>
    %l = mt.reduce_mean %h over [batch, seq, ffn] : <[batch=2, seq=8, ffn=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests expert parallelism's parameters and data: the expert weight (experts leading) is
// split over ep, the router ([hidden, experts]) stays whole, and the micro-batch is split
// over ep at the entry.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router}
// CHECK-SAME: %arg2: !mt.tensor<[experts=2, hidden=4], f32> {mt.param = @w}
// CHECK: mtp.all_slice {{.*}} over "ep" along "batch" {{.*}} -> <[batch=4, hidden=4], f32, <[ep = 2]>, split {batch = [ep]}>
// CHECK: mt.contract {{.*}}, %arg1 over [hidden] {{.*}} -> <[batch=2, experts=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @router : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  mt.param @w : !mt.tensor<[experts=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=4, hidden=4], f32>,
                     %router: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router},
                     %w: !mt.tensor<[experts=4, hidden=4], f32> {mt.param = @w}) -> !mt.tensor<[], f32> {
    %logits = mt.contract %x, %router over [hidden] : <[batch=4, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=4, experts=4], f32>
    %y = mt.contract %logits, %w over [experts] : <[batch=4, experts=4], f32>, <[experts=4, hidden=4], f32> -> <[batch=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [batch, hidden] : <[batch=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that an expert-parallel degree that does not divide the micro-batch is an error
// naming the argument.
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @w : !mt.tensor<[experts=4, hidden=4], f32> init normal(2.000000e-02)
  // expected-error @+1 {{ep 2 does not divide batch = 3 of argument #0 of @forward (the micro-batch)}}
  func.func @forward(%x: !mt.tensor<[batch=3, experts=4], f32>,
                     %w: !mt.tensor<[experts=4, hidden=4], f32> {mt.param = @w}) -> !mt.tensor<[batch=3, hidden=4], f32> {
    %y = mt.contract %x, %w over [experts] : <[batch=3, experts=4], f32>, <[experts=4, hidden=4], f32> -> <[batch=3, hidden=4], f32>
    return %y : !mt.tensor<[batch=3, hidden=4], f32>
  }
}

// -----

// Tests sequence parallelism: the row-parallel contraction's partial sums are
// reduce-scattered along seq (the bias add and dropout run on a quarter of the sequence
// each), a sum of partial values stays partial until then, and the next column-parallel
// contraction all-gathers the sequence first. The dropout of the split tensor records its
// layout, so its mask is the global one.
// CHECK-LABEL: func.func @forward
// CHECK: mt.contract %arg0, %arg1 over [hidden] {{.*}} -> <[seq=8, ffn=4], f32>
// CHECK: mt.contract {{.*}} over [ffn] {{.*}} -> <[seq=8, hidden=4], f32>
// CHECK: mt.contract {{.*}} over [ffn] {{.*}} -> <[seq=8, hidden=4], f32>
// CHECK: %[[SUM:.*]] = mt.add {{.*}} -> <[seq=8, hidden=4], f32>
// CHECK: %[[P:.*]] = mtp.from_local %[[SUM]] {{.*}} partial [tp]>
// CHECK: mtp.reduce_scatter %[[P]] over "tp" along "seq" {{.*}} -> <[seq=8, hidden=4], f32, <[tp = 4]>, split {seq = [tp]}>
// CHECK: mt.add {{.*}} -> <[seq=2, hidden=4], f32>
// CHECK: mt.dropout {{.*}} {mtp.layout = !mtp.tensor<[seq=8, hidden=4], f32, <[tp = 4]>, split {seq = [tp]}>} : <[seq=2, hidden=4], f32>
// CHECK: mtp.all_gather {{.*}} over "tp" along "seq"
// CHECK: mt.contract {{.*}} over [hidden] {{.*}} -> <[seq=8, ffn=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 4, sp = true>} {
  mt.param @w1 : !mt.tensor<[hidden=4, ffn=16], f32> init normal(2.000000e-02)
  mt.param @w2 : !mt.tensor<[ffn=16, hidden=4], f32> init normal(2.000000e-02)
  mt.param @b2 : !mt.tensor<[hidden=4], f32> init zeros
  func.func @forward(%x: !mt.tensor<[seq=8, hidden=4], f32>,
                     %w1: !mt.tensor<[hidden=4, ffn=16], f32> {mt.param = @w1},
                     %w2: !mt.tensor<[ffn=16, hidden=4], f32> {mt.param = @w2},
                     %b2: !mt.tensor<[hidden=4], f32> {mt.param = @b2}) -> !mt.tensor<[], f32> {
    %h = mt.contract %x, %w1 over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, ffn=16], f32> -> <[seq=8, ffn=16], f32>
    %y1 = mt.contract %h, %w2 over [ffn] : <[seq=8, ffn=16], f32>, <[ffn=16, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %y2 = mt.contract %h, %w2 over [ffn] : <[seq=8, ffn=16], f32>, <[ffn=16, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %y = mt.add %y1, %y2 : <[seq=8, hidden=4], f32>, <[seq=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %z = mt.add %y, %b2 : <[seq=8, hidden=4], f32>, <[hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %d = mt.dropout %z rate 1.000000e-01 stream 0 : <[seq=8, hidden=4], f32>
    %h2 = mt.contract %d, %w1 over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, ffn=16], f32> -> <[seq=8, ffn=16], f32>
    %l = mt.reduce_sum %h2 over [seq, ffn] : <[seq=8, ffn=16], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that rope carries a heads split under tp (each rank rotates its heads; Megatron's
// layout has no collective before attention) and needs no offset: the positions are whole.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: mtp.all_gather
// CHECK: %[[Q:.*]] = mt.contract %arg0, %arg1 over [hidden] {{.*}} -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NEXT: %[[R:.*]] = mt.rope %[[Q]] over head_dim position seq : <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NEXT: mt.contract %[[R]], %arg2 over [heads, head_dim] : <[seq=4, heads=2, head_dim=4], f32>, <[heads=2, head_dim=4, hidden=4], f32> -> <[seq=4, hidden=4], f32>
// CHECK: mtp.all_reduce {{.*}} over ["tp"]
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[hidden=4, heads=4, head_dim=4], f32> init normal(2.000000e-02)
  mt.param @wo : !mt.tensor<[heads=4, head_dim=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=4, hidden=4], f32>,
                     %wq: !mt.tensor<[hidden=4, heads=4, head_dim=4], f32> {mt.param = @wq},
                     %wo: !mt.tensor<[heads=4, head_dim=4, hidden=4], f32> {mt.param = @wo}) -> !mt.tensor<[], f32> {
    %q = mt.contract %x, %wq over [hidden] : <[seq=4, hidden=4], f32>, <[hidden=4, heads=4, head_dim=4], f32> -> <[seq=4, heads=4, head_dim=4], f32>
    %r = mt.rope %q over head_dim position seq : <[seq=4, heads=4, head_dim=4], f32>
    %y = mt.contract %r, %wo over [heads, head_dim] : <[seq=4, heads=4, head_dim=4], f32>, <[heads=4, head_dim=4, hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %l = mt.reduce_sum %y over [seq, hidden] : <[seq=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that rope rotates pairs of its rotated dimension, so a layout splitting it (here
// head_dim over tp) has it gathered first.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mt.contract %arg0, %arg1 over [hidden] {{.*}} -> <[seq=4, head_dim=2], f32>
// CHECK: mtp.all_gather {{.*}} over "tp" along "head_dim" : <[seq=4, head_dim=4], f32, <[tp = 2]>, split {head_dim = [tp]}> -> <[seq=4, head_dim=4], f32, <[tp = 2]>>
// CHECK: mt.rope {{.*}} over head_dim position seq : <[seq=4, head_dim=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, layout = {head_dim: tp}>} {
  mt.param @wq : !mt.tensor<[hidden=4, head_dim=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=4, hidden=4], f32>,
                     %wq: !mt.tensor<[hidden=4, head_dim=4], f32> {mt.param = @wq}) -> !mt.tensor<[], f32> {
    %q = mt.contract %x, %wq over [hidden] : <[seq=4, hidden=4], f32>, <[hidden=4, head_dim=4], f32> -> <[seq=4, head_dim=4], f32>
    %r = mt.rope %q over head_dim position seq : <[seq=4, head_dim=4], f32>
    %l = mt.reduce_sum %r over [seq, head_dim] : <[seq=4, head_dim=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests context parallelism's attention scores (the all-gather variant): the data arrive
// whole and are sliced along seq at the entry; q and k are rotated on this rank's part of
// the sequence, at its global positions (mtp.layout gives the lowering the offset); the
// contraction of q (seq split) with k (seq_kv split) clashes on cp and gathers k along
// seq_kv, the lower-priority dimension, so the scores keep the query split.
// CHECK-LABEL: func.func @forward
// CHECK: mtp.all_slice {{.*}} over "cp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2]>> -> <[seq=8, hidden=4], f32, <[cp = 2]>, split {seq = [cp]}>
// CHECK: %[[Q:.*]] = mt.contract {{.*}} over [hidden] {{.*}} -> <[seq=4, head_dim=4], f32>
// CHECK-NEXT: %[[QR:.*]] = mt.rope %[[Q]] over head_dim position seq {mtp.layout = !mtp.tensor<[seq=8, head_dim=4], f32, <[cp = 2]>, split {seq = [cp]}>} : <[seq=4, head_dim=4], f32>
// CHECK: %[[K:.*]] = mt.rope {{.*}} {mtp.layout = !mtp.tensor<[seq=8, head_dim=4], f32, <[cp = 2]>, split {seq = [cp]}>} : <[seq=4, head_dim=4], f32>
// CHECK-NEXT: %[[KV:.*]] = mt.rename %[[K]] seq to seq_kv : <[seq=4, head_dim=4], f32> -> <[seq_kv=4, head_dim=4], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[KV]]
// CHECK-NEXT: mtp.all_gather %[[V]] over "cp" along "seq_kv" : <[seq_kv=8, head_dim=4], f32, <[cp = 2]>, split {seq_kv = [cp]}> -> <[seq_kv=8, head_dim=4], f32, <[cp = 2]>>
// CHECK: mt.contract %[[QR]], {{.*}} over [head_dim] : <[seq=4, head_dim=4], f32>, <[seq_kv=8, head_dim=4], f32> -> <[seq=4, seq_kv=8], f32>
// CHECK: mtp.all_reduce {{.*}} over ["cp"] : <[], f32, <[cp = 2]>, partial [cp]>
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2>} {
  mt.param @wq : !mt.tensor<[hidden=4, head_dim=4], f32> init normal(2.000000e-02)
  mt.param @wk : !mt.tensor<[hidden=4, head_dim=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=8, hidden=4], f32>,
                     %wq: !mt.tensor<[hidden=4, head_dim=4], f32> {mt.param = @wq},
                     %wk: !mt.tensor<[hidden=4, head_dim=4], f32> {mt.param = @wk}) -> !mt.tensor<[], f32> {
    %q = mt.contract %x, %wq over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, head_dim=4], f32> -> <[seq=8, head_dim=4], f32>
    %qr = mt.rope %q over head_dim position seq : <[seq=8, head_dim=4], f32>
    %k = mt.contract %x, %wk over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, head_dim=4], f32> -> <[seq=8, head_dim=4], f32>
    %kr = mt.rope %k over head_dim position seq : <[seq=8, head_dim=4], f32>
    %kv = mt.rename %kr seq to seq_kv : <[seq=8, head_dim=4], f32> -> <[seq_kv=8, head_dim=4], f32>
    %s = mt.contract %qr, %kv over [head_dim] : <[seq=8, head_dim=4], f32>, <[seq_kv=8, head_dim=4], f32> -> <[seq=8, seq_kv=8], f32>
    %l = mt.reduce_sum %s over [seq, seq_kv] : <[seq=8, seq_kv=8], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests context parallelism's key gradient: contracting the score gradient (query split
// over cp) with the query over seq leaves partial sums over the whole key sequence; the
// rename carries them, and one reduce-scatter along seq brings them back to this rank's
// part before anything computes on them (the inverse rope at its global positions, the
// contraction with the weight), not an all-reduce and whole-sequence compute.
// CHECK-LABEL: func.func @forward
// CHECK: %[[DK:.*]] = mt.contract {{.*}} over [seq] : <[seq=4, seq_kv=8], f32>, <[seq=4, head_dim=4], f32> -> <[seq_kv=8, head_dim=4], f32>
// CHECK-NEXT: %[[R:.*]] = mt.rename %[[DK]] seq_kv to seq : <[seq_kv=8, head_dim=4], f32> -> <[seq=8, head_dim=4], f32>
// CHECK-NEXT: %[[P:.*]] = mtp.from_local %[[R]] : <[seq=8, head_dim=4], f32> -> <[seq=8, head_dim=4], f32, <[cp = 2]>, partial [cp]>
// CHECK-NEXT: %[[S:.*]] = mtp.reduce_scatter %[[P]] over "cp" along "seq" : <[seq=8, head_dim=4], f32, <[cp = 2]>, partial [cp]> -> <[seq=8, head_dim=4], f32, <[cp = 2]>, split {seq = [cp]}>
// CHECK-NEXT: %[[L:.*]] = mtp.to_local %[[S]]
// CHECK-NEXT: mt.rope %[[L]] over head_dim position seq inverse {mtp.layout = !mtp.tensor<[seq=8, head_dim=4], f32, <[cp = 2]>, split {seq = [cp]}>} : <[seq=4, head_dim=4], f32>
// CHECK-NEXT: mt.contract %[[L]], %arg2 over [head_dim] : <[seq=4, head_dim=4], f32>, <[hidden=4, head_dim=4], f32> -> <[seq=4, hidden=4], f32>
// CHECK-NOT: mtp.reduce_scatter
// CHECK-NOT: mtp.all_gather
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2>} {
  mt.param @wk : !mt.tensor<[hidden=4, head_dim=4], f32> init normal(2.000000e-02)
  func.func @forward(%ds: !mt.tensor<[seq=8, seq_kv=8], f32>, %q: !mt.tensor<[seq=8, head_dim=4], f32>,
                     %wk: !mt.tensor<[hidden=4, head_dim=4], f32> {mt.param = @wk}) -> !mt.tensor<[], f32> {
    %dk = mt.contract %ds, %q over [seq] : <[seq=8, seq_kv=8], f32>, <[seq=8, head_dim=4], f32> -> <[seq_kv=8, head_dim=4], f32>
    %r = mt.rename %dk seq_kv to seq : <[seq_kv=8, head_dim=4], f32> -> <[seq=8, head_dim=4], f32>
    %dkr = mt.rope %r over head_dim position seq inverse : <[seq=8, head_dim=4], f32>
    %dx = mt.contract %r, %wk over [head_dim] : <[seq=8, head_dim=4], f32>, <[hidden=4, head_dim=4], f32> -> <[seq=8, hidden=4], f32>
    %a = mt.reduce_sum %dkr over [seq, head_dim] : <[seq=8, head_dim=4], f32> -> <[], f32>
    %b = mt.reduce_sum %dx over [seq, hidden] : <[seq=8, hidden=4], f32> -> <[], f32>
    %l = mt.add %a, %b : <[], f32>, <[], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the vocabulary-parallel embedding gradient under cp x tp: the positions stay
// split over cp (the token ids and the gradient are sliced at the entry, nothing is
// gathered), each rank accumulates its rows of the table from its part of the sequence,
// and the partial sums over cp are all-reduced into the parameter's layout.
// CHECK-LABEL: func.func @forward_backward
// CHECK-NOT: mtp.all_gather
// CHECK: %[[E:.*]] = mt.embedding_grad %{{.*}}, %{{.*}} over vocab {mtp.layout = !mtp.tensor<[vocab=16, hidden=4], f32, <[cp = 2, tp = 2]>, split {vocab = [tp]}, partial [cp]>} : <[seq=4], i32>, <[seq=4, hidden=4], f32> -> <[vocab=8, hidden=4], f32>
// CHECK: %[[P:.*]] = mtp.from_local %[[E]]
// CHECK-NEXT: mtp.all_reduce %[[P]] over ["cp"] : <[vocab=16, hidden=4], f32, <[cp = 2, tp = 2]>, split {vocab = [tp]}, partial [cp]> -> <[vocab=16, hidden=4], f32, <[cp = 2, tp = 2]>, split {vocab = [tp]}>
// CHECK-NOT: mtp.all_gather
// CHECK: return {{.*}} : !mt.tensor<[], f32>, !mt.tensor<[vocab=8, hidden=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, cp = 2>} {
  mt.param @wte : !mt.tensor<[vocab=16, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%tokens: !mt.tensor<[seq=8], i32>, %g: !mt.tensor<[seq=8, hidden=4], f32>)
      -> (!mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>) attributes {mt.grads = [@wte]} {
    %l = mt.reduce_sum %g over [seq, hidden] : <[seq=8, hidden=4], f32> -> <[], f32>
    %e = mt.embedding_grad %tokens, %g over vocab : <[seq=8], i32>, <[seq=8, hidden=4], f32> -> <[vocab=16, hidden=4], f32>
    return %l, %e : !mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>
  }
}

// -----

// Tests the vocabulary split (Megatron's vocabulary-parallel embedding and loss): the
// lookup reads only this rank's rows of the table (mtp.layout tells the lowering which) and
// its partial sums are all-reduced; the logits stay split; their maximum over the split
// vocabulary is a partial maximum, combined at once by a max all-reduce; a mean over the
// split vocabulary is this rank's local mean scaled by 1/2 (its share of the global mean),
// summed by an all_reduce for the replicated loss.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: mtp.all_gather
// CHECK: %[[X:.*]] = mt.gather %arg1, %arg0 over vocab {mtp.layout = !mtp.tensor<[vocab=16, hidden=4], f32, <[tp = 2]>, split {vocab = [tp]}>} : <[vocab=8, hidden=4], f32>, <[seq=4], i32> -> <[seq=4, hidden=4], f32>
// CHECK: %[[P:.*]] = mtp.from_local %[[X]] : <[seq=4, hidden=4], f32> -> <[seq=4, hidden=4], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce %[[P]] over ["tp"] :
// CHECK: %[[LOGITS:.*]] = mt.contract {{.*}} -> <[seq=4, vocab=8], f32>
// CHECK: %[[LMAX:.*]] = mt.reduce_max %[[LOGITS]] over [vocab] : <[seq=4, vocab=8], f32> -> <[seq=4], f32>
// CHECK: %[[PMAX:.*]] = mtp.from_local %[[LMAX]] {{.*}} partial [tp]>
// CHECK: %[[GMAX:.*]] = mtp.all_reduce %[[PMAX]] over ["tp"] reduction = max
// CHECK: %[[MAX:.*]] = mtp.to_local %[[GMAX]]
// CHECK: mt.sub %[[LOGITS]], %[[MAX]]
// CHECK: %[[M:.*]] = mt.reduce_mean {{.*}} over [seq, vocab] : <[seq=4, vocab=8], f32> -> <[], f32>
// CHECK: %[[HALF:.*]] = mt.constant 5.000000e-01 : <[], f32>
// CHECK: %[[S:.*]] = mt.mul %[[M]], %[[HALF]]
// CHECK: %[[PS:.*]] = mtp.from_local %[[S]] : <[], f32> -> <[], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce %[[PS]] over ["tp"] :
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wte : !mt.tensor<[vocab=16, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[seq=4], i32>,
                     %wte: !mt.tensor<[vocab=16, hidden=4], f32> {mt.param = @wte}) -> !mt.tensor<[], f32> {
    %x = mt.gather %wte, %tokens over vocab : <[vocab=16, hidden=4], f32>, <[seq=4], i32> -> <[seq=4, hidden=4], f32>
    %logits = mt.contract %x, %wte over [hidden] : <[seq=4, hidden=4], f32>, <[vocab=16, hidden=4], f32> -> <[seq=4, vocab=16], f32>
    %max = mt.reduce_max %logits over [vocab] : <[seq=4, vocab=16], f32> -> <[seq=4], f32>
    %shifted = mt.sub %logits, %max : <[seq=4, vocab=16], f32>, <[seq=4], f32> -> <[seq=4, vocab=16], f32>
    %m = mt.reduce_mean %shifted over [seq, vocab] : <[seq=4, vocab=16], f32> -> <[], f32>
    return %m : !mt.tensor<[], f32>
  }
}

// -----

// Tests the optimizer's global gradient norm: a split gradient's sum of squares is partial;
// the replicated one's becomes partial too (to_partial: coordinate 0 keeps it), so every
// element counts once and one all-reduce sums the total; the updated parameter keeps its
// split and needs no communication.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: %arg2: !mt.tensor<[heads=2], f32> {mt.grad = @wq}, %arg3: !mt.tensor<[hidden=4], f32> {mt.grad = @g}
// CHECK: %[[SQ:.*]] = mt.reduce_sum {{.*}} over [heads] : <[heads=2], f32> -> <[], f32>
// CHECK: %[[SQ2:.*]] = mt.reduce_sum {{.*}} over [hidden] : <[hidden=4], f32> -> <[], f32>
// CHECK: %[[W:.*]] = mtp.from_local %[[SQ2]] : <[], f32> -> <[], f32, <[tp = 2]>>
// CHECK: %[[S:.*]] = mtp.to_partial %[[W]] over "tp" : <[], f32, <[tp = 2]>> -> <[], f32, <[tp = 2]>, partial [tp]>
// CHECK: %[[L:.*]] = mtp.to_local %[[S]]
// CHECK: %[[SUM:.*]] = mt.add %[[SQ]], %[[L]]
// CHECK: %[[P:.*]] = mtp.from_local %[[SUM]] {{.*}} partial [tp]>
// CHECK: mtp.all_reduce %[[P]]
// CHECK-NOT: mtp.all_reduce
// CHECK: return {{.*}} : !mt.tensor<[], f32>, !mt.tensor<[heads=2], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[heads=4], f32> init normal(2.000000e-02)
  mt.param @g : !mt.tensor<[hidden=4], f32> init ones
  func.func @optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>,
                            %dwq: !mt.tensor<[heads=4], f32> {mt.grad = @wq},
                            %dg: !mt.tensor<[hidden=4], f32> {mt.grad = @g},
                            %wq: !mt.tensor<[heads=4], f32> {mt.param = @wq})
      -> (!mt.tensor<[], f32>, !mt.tensor<[heads=4], f32> {mt.param = @wq})
      attributes {mt.grads = [@wq, @g], mt.optimizer} {
    %sq1 = mt.mul %dwq, %dwq : <[heads=4], f32>, <[heads=4], f32> -> <[heads=4], f32>
    %n1 = mt.reduce_sum %sq1 over [heads] : <[heads=4], f32> -> <[], f32>
    %sq2 = mt.mul %dg, %dg : <[hidden=4], f32>, <[hidden=4], f32> -> <[hidden=4], f32>
    %n2 = mt.reduce_sum %sq2 over [hidden] : <[hidden=4], f32> -> <[], f32>
    %n = mt.add %n1, %n2 : <[], f32>, <[], f32> -> <[], f32>
    %w = mt.sub %wq, %dwq : <[heads=4], f32>, <[heads=4], f32> -> <[heads=4], f32>
    return %n, %w : !mt.tensor<[], f32>, !mt.tensor<[heads=4], f32>
  }
}

// -----

// Tests a layer scan: the layer function is partitioned for the layouts its repeat passes
// (stacked parameters without their layers dimension) and returns partial-free values.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%arg0: !mt.tensor<[batch=2, hidden=4], f32>, %arg1: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @l.w1}, %arg2: !mt.tensor<[ffn=4, hidden=4], f32> {mt.param = @l.w2})
// CHECK: mtp.all_reduce
// CHECK-LABEL: func.func @forward
// CHECK: mt.repeat @layer(%arg0, %arg1, %arg2) count 2 {carried = 1 : i64} : (!mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4, ffn=4], f32>, !mt.tensor<[layers=2, ffn=4, hidden=4], f32>) -> !mt.tensor<[batch=2, hidden=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @l.w1 layer @layer : !mt.tensor<[layers=2, hidden=4, ffn=8], f32> init normal(2.000000e-02)
  mt.param @l.w2 layer @layer : !mt.tensor<[layers=2, ffn=8, hidden=4], f32> init normal(2.000000e-02)
  func.func @layer(%x: !mt.tensor<[batch=2, hidden=4], f32>,
                   %w1: !mt.tensor<[hidden=4, ffn=8], f32> {mt.param = @l.w1},
                   %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @l.w2})
      -> !mt.tensor<[batch=2, hidden=4], f32> attributes {mt.layer} {
    %h = mt.contract %x, %w1 over [hidden] : <[batch=2, hidden=4], f32>, <[hidden=4, ffn=8], f32> -> <[batch=2, ffn=8], f32>
    %y = mt.contract %h, %w2 over [ffn] : <[batch=2, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[batch=2, hidden=4], f32>
    %z = mt.add %x, %y : <[batch=2, hidden=4], f32>, <[batch=2, hidden=4], f32> -> <[batch=2, hidden=4], f32>
    return %z : !mt.tensor<[batch=2, hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[batch=2, hidden=4], f32>,
                     %w1: !mt.tensor<[layers=2, hidden=4, ffn=8], f32> {mt.param = @l.w1},
                     %w2: !mt.tensor<[layers=2, ffn=8, hidden=4], f32> {mt.param = @l.w2}) -> !mt.tensor<[], f32> {
    %y = mt.repeat @layer(%x, %w1, %w2) count 2 {carried = 1 : i64} : (!mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4, ffn=8], f32>, !mt.tensor<[layers=2, ffn=8, hidden=4], f32>) -> !mt.tensor<[batch=2, hidden=4], f32>
    %l = mt.reduce_sum %y over [batch, hidden] : <[batch=2, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the reshape rules: a merge whose outermost dimension is split keeps the split on
// the merged dimension, and a split gives it back to the first (slowest) part, with no
// communication; a rename carries the split to the new name; a merge whose split dimension
// is not the outermost, and a split whose first part the axis does not divide, gather the
// dimension first.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mt.contract %arg0, %arg1 over [hidden] {{.*}} -> <[seq=2, heads=2, head_dim=2], f32>
// CHECK-NEXT: %[[M:.*]] = mt.merge %[[Q]] [heads, head_dim] into model : <[seq=2, heads=2, head_dim=2], f32> -> <[seq=2, model=4], f32>
// CHECK-NEXT: %[[S:.*]] = mt.split %[[M]] model into [heads, head_dim] : <[seq=2, model=4], f32> -> <[seq=2, heads=2, head_dim=2], f32>
// CHECK-NEXT: %[[R:.*]] = mt.rename %[[S]] heads to groups : <[seq=2, heads=2, head_dim=2], f32> -> <[seq=2, groups=2, head_dim=2], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[R]] : <[seq=2, groups=2, head_dim=2], f32> -> <[seq=2, groups=4, head_dim=2], f32, <[tp = 2]>, split {groups = [tp]}>
// CHECK-NEXT: %[[G:.*]] = mtp.all_gather %[[V]] over "tp" along "groups" : <[seq=2, groups=4, head_dim=2], f32, <[tp = 2]>, split {groups = [tp]}> -> <[seq=2, groups=4, head_dim=2], f32, <[tp = 2]>>
// CHECK-NEXT: %[[W:.*]] = mtp.to_local %[[G]]
// CHECK-NEXT: mt.merge %[[W]] [head_dim, groups] into inner : <[seq=2, groups=4, head_dim=2], f32> -> <[seq=2, inner=8], f32>
// CHECK: %[[V2:.*]] = mtp.from_local %[[M]] : <[seq=2, model=4], f32> -> <[seq=2, model=8], f32, <[tp = 2]>, split {model = [tp]}>
// CHECK-NEXT: mtp.all_gather %[[V2]] over "tp" along "model"
// CHECK: mt.split {{.*}} model into [one, rest] : <[seq=2, model=8], f32> -> <[seq=2, one=1, rest=8], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[hidden=4, heads=4, head_dim=2], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=2, hidden=4], f32>,
                     %wq: !mt.tensor<[hidden=4, heads=4, head_dim=2], f32> {mt.param = @wq}) -> !mt.tensor<[], f32> {
    %q = mt.contract %x, %wq over [hidden] : <[seq=2, hidden=4], f32>, <[hidden=4, heads=4, head_dim=2], f32> -> <[seq=2, heads=4, head_dim=2], f32>
    %m = mt.merge %q [heads, head_dim] into model : <[seq=2, heads=4, head_dim=2], f32> -> <[seq=2, model=8], f32>
    %s = mt.split %m model into [heads, head_dim] : <[seq=2, model=8], f32> -> <[seq=2, heads=4, head_dim=2], f32>
    %r = mt.rename %s heads to groups : <[seq=2, heads=4, head_dim=2], f32> -> <[seq=2, groups=4, head_dim=2], f32>
    %i = mt.merge %r [head_dim, groups] into inner : <[seq=2, groups=4, head_dim=2], f32> -> <[seq=2, inner=8], f32>
    %o = mt.split %m model into [one, rest] : <[seq=2, model=8], f32> -> <[seq=2, one=1, rest=8], f32>
    %a = mt.reduce_sum %i over [seq, inner] : <[seq=2, inner=8], f32> -> <[], f32>
    %b = mt.reduce_sum %o over [seq, one, rest] : <[seq=2, one=1, rest=8], f32> -> <[], f32>
    %l = mt.add %a, %b : <[], f32>, <[], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the vocabulary-parallel embedding gradient: the layout splits the table along
// vocab and the gradient does not use tp, so each rank accumulates only its rows
// (mtp.layout tells the lowering which) and the result already has the parameter's
// layout: no collective.
// CHECK-LABEL: func.func @forward_backward
// CHECK-NOT: mtp.
// CHECK: %[[E:.*]] = mt.embedding_grad %arg0, %arg1 over vocab {mtp.layout = !mtp.tensor<[vocab=16, hidden=4], f32, <[tp = 2]>, split {vocab = [tp]}>} : <[seq=4], i32>, <[seq=4, hidden=4], f32> -> <[vocab=8, hidden=4], f32>
// CHECK-NOT: mtp.
// CHECK: return {{.*}}, %[[E]] : !mt.tensor<[], f32>, !mt.tensor<[vocab=8, hidden=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wte : !mt.tensor<[vocab=16, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%tokens: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[seq=4, hidden=4], f32>)
      -> (!mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>) attributes {mt.grads = [@wte]} {
    %l = mt.reduce_sum %g over [seq, hidden] : <[seq=4, hidden=4], f32> -> <[], f32>
    %e = mt.embedding_grad %tokens, %g over vocab : <[seq=4], i32>, <[seq=4, hidden=4], f32> -> <[vocab=16, hidden=4], f32>
    return %l, %e : !mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>
  }
}

// -----

// Tests the embedding gradient of a gradient split along the positions (sequence
// parallelism: the row-parallel contraction's partial sums are reduce-scattered along
// seq): the split positions make the scatter-add a partial sum; the token ids are sliced
// to the same positions (no communication), and the partial table gradient is
// reduce-scattered into the parameter's vocabulary split.
// CHECK-LABEL: func.func @forward_backward
// CHECK: mtp.reduce_scatter {{.*}} over "tp" along "seq" : <[seq=4, hidden=4], f32, <[tp = 2]>, partial [tp]> -> <[seq=4, hidden=4], f32, <[tp = 2]>, split {seq = [tp]}>
// CHECK: %[[G:.*]] = mt.mul {{.*}} -> <[seq=2, hidden=4], f32>
// CHECK: mtp.all_slice {{.*}} over "tp" along "seq" : <[seq=4], i32, <[tp = 2]>> -> <[seq=4], i32, <[tp = 2]>, split {seq = [tp]}>
// CHECK: %[[E:.*]] = mt.embedding_grad %{{.*}}, %[[G]] over vocab : <[seq=2], i32>, <[seq=2, hidden=4], f32> -> <[vocab=16, hidden=4], f32>
// CHECK: %[[P:.*]] = mtp.from_local %[[E]] : <[vocab=16, hidden=4], f32> -> <[vocab=16, hidden=4], f32, <[tp = 2]>, partial [tp]>
// CHECK-NEXT: mtp.reduce_scatter %[[P]] over "tp" along "vocab" : <[vocab=16, hidden=4], f32, <[tp = 2]>, partial [tp]> -> <[vocab=16, hidden=4], f32, <[tp = 2]>, split {vocab = [tp]}>
// CHECK: return {{.*}} : !mt.tensor<[], f32>, !mt.tensor<[vocab=8, hidden=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, sp = true>} {
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wte : !mt.tensor<[vocab=16, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%tokens: !mt.tensor<[seq=4], i32>, %x: !mt.tensor<[seq=4, ffn=8], f32>,
                              %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @w2})
      -> (!mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>) attributes {mt.grads = [@wte]} {
    %y = mt.contract %x, %w2 over [ffn] : <[seq=4, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %g = mt.mul %y, %y : <[seq=4, hidden=4], f32>, <[seq=4, hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %l = mt.reduce_sum %g over [seq, hidden] : <[seq=4, hidden=4], f32> -> <[], f32>
    %e = mt.embedding_grad %tokens, %g over vocab : <[seq=4], i32>, <[seq=4, hidden=4], f32> -> <[vocab=16, hidden=4], f32>
    return %l, %e : !mt.tensor<[], f32>, !mt.tensor<[vocab=16, hidden=4], f32>
  }
}

// -----

// Tests that an op without a partition rule is reported, not partitioned as if it had one.
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[heads=4], f32> init zeros
  func.func private @helper(!mt.tensor<[seq=4], f32>) -> !mt.tensor<[seq=4], f32>
  func.func @forward(%x: !mt.tensor<[seq=4], f32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{'func.call' op has no partition rule (PartitionOpInterface): it cannot be laid out on the mesh}}
    %y = func.call @helper(%x) : (!mt.tensor<[seq=4], f32>) -> !mt.tensor<[seq=4], f32>
    %l = mt.reduce_sum %y over [seq] : <[seq=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the linear rules that keep partial sums: a negation, a transpose and a broadcast of
// the row-parallel contraction's partial sums stay partial, and so does the sum over all
// their dimensions; the one all-reduce sums the replicated result.
// CHECK-LABEL: func.func @forward
// CHECK: mtp.all_slice {{.*}} over "tp" along "ffn"
// CHECK: %[[Y:.*]] = mt.contract {{.*}} over [ffn] : <[seq=4, ffn=4], f32>, <[ffn=4, hidden=2], f32> -> <[seq=4, hidden=2], f32>
// CHECK-NEXT: %[[N:.*]] = mt.neg %[[Y]] : <[seq=4, hidden=2], f32>
// CHECK-NEXT: %[[T:.*]] = mt.transpose %[[N]] : <[seq=4, hidden=2], f32> to <[hidden=2, seq=4], f32>
// CHECK-NEXT: %[[B:.*]] = mt.broadcast %[[T]] : <[hidden=2, seq=4], f32> to <[batch=3, hidden=2, seq=4], f32>
// CHECK-NEXT: %[[S:.*]] = mt.reduce_sum %[[B]] over [batch, hidden, seq] : <[batch=3, hidden=2, seq=4], f32> -> <[], f32>
// CHECK-NEXT: %[[P:.*]] = mtp.from_local %[[S]] : <[], f32> -> <[], f32, <[tp = 2]>, partial [tp]>
// CHECK-NEXT: %[[R:.*]] = mtp.all_reduce %[[P]] over ["tp"]
// CHECK-NEXT: %[[L:.*]] = mtp.to_local %[[R]]
// CHECK-NEXT: return %[[L]]
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=2], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=4, ffn=8], f32>,
                     %w2: !mt.tensor<[ffn=8, hidden=2], f32> {mt.param = @w2}) -> !mt.tensor<[], f32> {
    %y = mt.contract %x, %w2 over [ffn] : <[seq=4, ffn=8], f32>, <[ffn=8, hidden=2], f32> -> <[seq=4, hidden=2], f32>
    %n = mt.neg %y : <[seq=4, hidden=2], f32>
    %t = mt.transpose %n : !mt.tensor<[seq=4, hidden=2], f32> to !mt.tensor<[hidden=2, seq=4], f32>
    %b = mt.broadcast %t : !mt.tensor<[hidden=2, seq=4], f32> to !mt.tensor<[batch=3, hidden=2, seq=4], f32>
    %s = mt.reduce_sum %b over [batch, hidden, seq] : <[batch=3, hidden=2, seq=4], f32> -> <[], f32>
    return %s : !mt.tensor<[], f32>
  }
}

// -----

// Tests an op without a sharded form (softmax, which mt-decompose removes before
// partitioning in the pipeline): its operand, split along heads by the
// column-parallel contraction, is gathered first, and it runs on the whole tensor.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mt.contract {{.*}} -> <[seq=4, heads=1, head_dim=2], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[Q]] : <[seq=4, heads=1, head_dim=2], f32> -> <[seq=4, heads=2, head_dim=2], f32, <[tp = 2]>, split {heads = [tp]}>
// CHECK-NEXT: %[[G:.*]] = mtp.all_gather %[[V]] over "tp" along "heads"
// CHECK-NEXT: %[[W:.*]] = mtp.to_local %[[G]] : {{.*}} -> <[seq=4, heads=2, head_dim=2], f32>
// CHECK-NEXT: mt.softmax %[[W]] over head_dim : <[seq=4, heads=2, head_dim=2], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=4, hidden=4], f32>,
                     %wq: !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> {mt.param = @wq}) -> !mt.tensor<[], f32> {
    %q = mt.contract %x, %wq over [hidden] : <[seq=4, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[seq=4, heads=2, head_dim=2], f32>
    %r = mt.softmax %q over head_dim : <[seq=4, heads=2, head_dim=2], f32>
    %s = mt.reduce_sum %r over [seq, heads, head_dim] : <[seq=4, heads=2, head_dim=2], f32> -> <[], f32>
    return %s : !mt.tensor<[], f32>
  }
}

// -----

// Tests expert parallelism's routing (ep 2): the router's logits keep the batch's split
// through topk; dispatch fills each rank's share of every expert's slots with its own
// tokens (capacity 4 of 8 tokens is 2 of each rank's 4), the expert contraction moves the
// slots to the experts' ranks, and combine brings them back to their tokens; the
// load-balancing loss of each rank's tokens is halved and summed over ep.
// CHECK-LABEL: func.func @forward
// CHECK: %[[V:.*]], %[[I:.*]] = mt.topk {{.*}} over experts k topk : <[batch=2, seq=2, experts=4], f32> -> <[batch=2, seq=2, topk=2], f32>, <[batch=2, seq=2, topk=2], i32>
// CHECK: %[[D:.*]] = mt.dispatch %{{.*}}, %[[I]] {{.*}} : <[batch=2, seq=2, hidden=4], f32>, <[batch=2, seq=2, topk=2], i32> -> <[experts=4, capacity=2, hidden=4], f32>
// CHECK: mtp.from_local %[[D]] {{.*}} -> <[experts=4, capacity=4, hidden=4], f32, <[ep = 2]>, split {capacity = [ep]}>
// CHECK: mt.contract {{.*}} : <[experts=2, capacity=4, hidden=4], f32>, <[experts=2, hidden=4, ffn=4], f32> -> <[experts=2, capacity=4, ffn=4], f32>
// CHECK: mtp.to_local {{.*}} split {capacity = [ep]}> -> <[experts=4, capacity=2, ffn=4], f32>
// CHECK: mt.combine {{.*}}, %[[I]], %[[V]] {{.*}} : <[experts=4, capacity=2, ffn=4], f32>, <[batch=2, seq=2, topk=2], i32>, <[batch=2, seq=2, topk=2], f32> -> <[batch=2, seq=2, ffn=4], f32>
// CHECK: %[[LB:.*]] = mt.load_balancing_loss {{.*}} : <[batch=2, seq=2, experts=4], f32>, <[batch=2, seq=2, topk=2], i32> -> <[], f32>
// CHECK: %[[HALF:.*]] = mt.constant 5.000000e-01
// CHECK: mt.mul %[[LB]], %[[HALF]]
// CHECK: mtp.all_reduce {{.*}} over ["ep"]
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @router : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=4, seq=2, hidden=4], f32>,
                     %router: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router},
                     %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1}) -> !mt.tensor<[], f32> {
    %logits = mt.contract %x, %router over [hidden] : <[batch=4, seq=2, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=4, seq=2, experts=4], f32>
    %v, %i = mt.topk %logits over experts k topk : <[batch=4, seq=2, experts=4], f32> -> <[batch=4, seq=2, topk=2], f32>, <[batch=4, seq=2, topk=2], i32>
    %d = mt.dispatch %x, %i k topk to experts capacity capacity factor 1.000000e+00 : <[batch=4, seq=2, hidden=4], f32>, <[batch=4, seq=2, topk=2], i32> -> <[experts=4, capacity=4, hidden=4], f32>
    %y = mt.contract %d, %w1 over [hidden] : <[experts=4, capacity=4, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=4, ffn=4], f32>
    %c = mt.combine %y, %i, %v k topk from experts capacity capacity : <[experts=4, capacity=4, ffn=4], f32>, <[batch=4, seq=2, topk=2], i32>, <[batch=4, seq=2, topk=2], f32> -> <[batch=4, seq=2, ffn=4], f32>
    %s = mt.reduce_sum %c over [batch, seq, ffn] : <[batch=4, seq=2, ffn=4], f32> -> <[], f32>
    %lb = mt.load_balancing_loss %logits, %i over experts k topk : <[batch=4, seq=2, experts=4], f32>, <[batch=4, seq=2, topk=2], i32> -> <[], f32>
    %t = mt.add %s, %lb : <[], f32>, <[], f32> -> <[], f32>
    return %t : !mt.tensor<[], f32>
  }
}

// -----

// Tests that combine_grad's routing-weight gradient, a sum over the features, is partial
// over the axis splitting them (ffn over tp here): one all_reduce sums it before a consumer
// that needs it whole (exp), while the slots' gradient keeps the ffn split.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[DY:.*]], %[[WG:.*]] = mt.combine_grad {{.*}} -> <[experts=4, capacity=4, ffn=2], f32>, <[batch=4, seq=2, topk=2], f32>
// CHECK: mtp.from_local %[[WG]] : <[batch=4, seq=2, topk=2], f32> -> <[batch=4, seq=2, topk=2], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce {{.*}} over ["tp"]
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, layout = {ffn: tp}>} {
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @w2 : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%routed: !mt.tensor<[experts=4, capacity=4, hidden=4], f32>,
                              %i: !mt.tensor<[batch=4, seq=2, topk=2], i32>,
                              %v: !mt.tensor<[batch=4, seq=2, topk=2], f32>,
                              %x: !mt.tensor<[batch=4, seq=2, hidden=4], f32>,
                              %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1},
                              %w2: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @w2}) -> !mt.tensor<[batch=4, seq=2, topk=2], f32> {
    %y = mt.contract %routed, %w1 over [hidden] : <[experts=4, capacity=4, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=4, ffn=4], f32>
    %dc = mt.contract %x, %w2 over [hidden] : <[batch=4, seq=2, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=4, seq=2, ffn=4], f32>
    %dy, %dv = mt.combine_grad %y, %i, %v, %dc k topk from experts capacity capacity : <[experts=4, capacity=4, ffn=4], f32>, <[batch=4, seq=2, topk=2], i32>, <[batch=4, seq=2, topk=2], f32>, <[batch=4, seq=2, ffn=4], f32> -> <[experts=4, capacity=4, ffn=4], f32>, <[batch=4, seq=2, topk=2], f32>
    %e = mt.exp %dv : <[batch=4, seq=2, topk=2], f32>
    return %e : !mt.tensor<[batch=4, seq=2, topk=2], f32>
  }
}

// -----

// Tests the routing's backward under ep 2: combine_grad takes the expert outputs' slots of
// each rank's tokens (the capacity split) with its tokens' output gradient; topk_grad keeps
// the batch's split; the load-balancing loss's gradient scales the (whole) loss gradient by
// 1/2 before the op, as the loss was.
// CHECK-LABEL: func.func @forward_backward
// CHECK: mtp.all_slice {{.*}} over "ep" along "capacity"
// CHECK: %{{.*}}, %[[WG:.*]] = mt.combine_grad {{.*}} : <[experts=4, capacity=2, ffn=4], f32>, <[batch=2, seq=2, topk=2], i32>, <[batch=2, seq=2, topk=2], f32>, <[batch=2, seq=2, ffn=4], f32> -> <[experts=4, capacity=2, ffn=4], f32>, <[batch=2, seq=2, topk=2], f32>
// CHECK: mt.topk_grad %[[WG]], {{.*}} : <[batch=2, seq=2, topk=2], f32>, <[batch=2, seq=2, topk=2], i32> -> <[batch=2, seq=2, experts=4], f32>
// CHECK: %[[HALF:.*]] = mt.constant 5.000000e-01
// CHECK: %[[G:.*]] = mt.mul %arg5, %[[HALF]]
// CHECK: mt.load_balancing_loss_grad {{.*}}, %[[G]] over experts k topk : <[batch=2, seq=2, experts=4], f32>, <[batch=2, seq=2, topk=2], i32>, <[], f32> -> <[batch=2, seq=2, experts=4], f32>
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%y: !mt.tensor<[experts=4, capacity=4, ffn=4], f32>,
                              %i: !mt.tensor<[batch=4, seq=2, topk=2], i32>,
                              %v: !mt.tensor<[batch=4, seq=2, topk=2], f32>,
                              %dc: !mt.tensor<[batch=4, seq=2, ffn=4], f32>,
                              %logits: !mt.tensor<[batch=4, seq=2, experts=4], f32>,
                              %dl: !mt.tensor<[], f32>,
                              %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1}) -> !mt.tensor<[], f32> {
    %dy, %dv = mt.combine_grad %y, %i, %v, %dc k topk from experts capacity capacity : <[experts=4, capacity=4, ffn=4], f32>, <[batch=4, seq=2, topk=2], i32>, <[batch=4, seq=2, topk=2], f32>, <[batch=4, seq=2, ffn=4], f32> -> <[experts=4, capacity=4, ffn=4], f32>, <[batch=4, seq=2, topk=2], f32>
    %dx = mt.topk_grad %dv, %i over experts k topk : <[batch=4, seq=2, topk=2], f32>, <[batch=4, seq=2, topk=2], i32> -> <[batch=4, seq=2, experts=4], f32>
    %dlb = mt.load_balancing_loss_grad %logits, %i, %dl over experts k topk : <[batch=4, seq=2, experts=4], f32>, <[batch=4, seq=2, topk=2], i32>, <[], f32> -> <[batch=4, seq=2, experts=4], f32>
    %a = mt.add %dx, %dlb : <[batch=4, seq=2, experts=4], f32>, <[batch=4, seq=2, experts=4], f32> -> <[batch=4, seq=2, experts=4], f32>
    %s = mt.reduce_sum %a over [batch, seq, experts] : <[batch=4, seq=2, experts=4], f32> -> <[], f32>
    %t = mt.reduce_sum %dy over [experts, capacity, ffn] : <[experts=4, capacity=4, ffn=4], f32> -> <[], f32>
    %u = mt.add %s, %t : <[], f32>, <[], f32> -> <[], f32>
    return %u : !mt.tensor<[], f32>
  }
}

// -----

// Tests the routing under ep 2 with tensor and sequence parallelism: the sequence, split over
// tp by the row-parallel contraction's reduce-scatter, is gathered for the routing (it would
// change which tokens compete for the slots): on the router's scores before topk, whose
// integer indices the collectives do not move, and on the tokens before dispatch. The
// batch's split over ep carries to the capacity. The expert weights are split over ep
// (experts) and tp (ffn).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg3: !mt.tensor<[experts=2, hidden=4, ffn=2], f32> {mt.param = @w1}
// CHECK: mtp.reduce_scatter {{.*}} over "tp" along "seq"
// CHECK: mtp.all_gather {{.*}} over "tp" along "seq" : <[batch=4, seq=4, experts=4], f32
// CHECK: mt.topk {{.*}} : <[batch=2, seq=4, experts=4], f32> -> <[batch=2, seq=4, topk=2], f32>, <[batch=2, seq=4, topk=2], i32>
// CHECK: mtp.all_gather {{.*}} over "tp" along "seq" : <[batch=4, seq=4, hidden=4], f32
// CHECK: mt.dispatch {{.*}} : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, topk=2], i32> -> <[experts=4, capacity=4, hidden=4], f32>
// CHECK: mt.contract {{.*}} : <[experts=2, capacity=8, hidden=4], f32>, <[experts=2, hidden=4, ffn=2], f32> -> <[experts=2, capacity=8, ffn=2], f32>
// CHECK: mt.load_balancing_loss {{.*}} : <[batch=2, seq=4, experts=4], f32>, <[batch=2, seq=4, topk=2], i32> -> <[], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, ep = 2, sp = true>} {
  mt.param @wa : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @wb : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @router : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=4, seq=4, hidden=4], f32>,
                     %wa: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @wa},
                     %wb: !mt.tensor<[ffn=4, hidden=4], f32> {mt.param = @wb},
                     %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1},
                     %router: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router}) -> !mt.tensor<[], f32> {
    %a = mt.contract %x, %wa over [hidden] : <[batch=4, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=4, seq=4, ffn=4], f32>
    %b = mt.contract %a, %wb over [ffn] : <[batch=4, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=4, seq=4, hidden=4], f32>
    %h = mt.add %b, %x : <[batch=4, seq=4, hidden=4], f32>, <[batch=4, seq=4, hidden=4], f32> -> <[batch=4, seq=4, hidden=4], f32>
    %logits = mt.contract %h, %router over [hidden] : <[batch=4, seq=4, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=4, seq=4, experts=4], f32>
    %v, %i = mt.topk %logits over experts k topk : <[batch=4, seq=4, experts=4], f32> -> <[batch=4, seq=4, topk=2], f32>, <[batch=4, seq=4, topk=2], i32>
    %d = mt.dispatch %h, %i k topk to experts capacity capacity factor 1.000000e+00 : <[batch=4, seq=4, hidden=4], f32>, <[batch=4, seq=4, topk=2], i32> -> <[experts=4, capacity=8, hidden=4], f32>
    %y = mt.contract %d, %w1 over [hidden] : <[experts=4, capacity=8, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=8, ffn=4], f32>
    %s = mt.reduce_sum %y over [experts, capacity, ffn] : <[experts=4, capacity=8, ffn=4], f32> -> <[], f32>
    %lb = mt.load_balancing_loss %logits, %i over experts k topk : <[batch=4, seq=4, experts=4], f32>, <[batch=4, seq=4, topk=2], i32> -> <[], f32>
    %t = mt.add %s, %lb : <[], f32>, <[], f32> -> <[], f32>
    return %t : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a capacity the expert-parallel ranks cannot share evenly is an error: 10
// tokens, top-1 of 4 experts give each expert 3 slots, which 2 ranks routing 5 tokens each
// cannot split.
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=2, seq=5, hidden=4], f32>,
                     %i: !mt.tensor<[batch=2, seq=5, topk=1], i32>,
                     %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1}) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{'mt.dispatch' op cannot split the capacity 3 of each expert evenly over the 2 ranks of 'ep' that route their own tokens; choose a micro-batch or capacity factor whose capacity they divide}}
    %d = mt.dispatch %x, %i k topk to experts capacity capacity factor 1.000000e+00 : <[batch=2, seq=5, hidden=4], f32>, <[batch=2, seq=5, topk=1], i32> -> <[experts=4, capacity=3, hidden=4], f32>
    %y = mt.contract %d, %w1 over [hidden] : <[experts=4, capacity=3, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=3, ffn=4], f32>
    %s = mt.reduce_sum %y over [experts, capacity, ffn] : <[experts=4, capacity=3, ffn=4], f32> -> <[], f32>
    return %s : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a pipeline chunk function (mt-pipeline-chunks) is partitioned like the entry
// functions: a parameter and its gradient (`mt.grad`) in the parameter's layout, the
// activations and residuals that cross stages whole (the output gathered).
// CHECK-LABEL: func.func @chunk0.backward
// CHECK-SAME: (%{{.*}}: !mt.tensor<[seq=2, hidden=4], f32> {mt.buffer = "residual", mt.index = 0 : i64}, %[[W:.*]]: !mt.tensor<[hidden=4, ffn=2], f32> {mt.param = @w})
// CHECK-SAME: -> (!mt.tensor<[seq=2, ffn=4], f32> {mt.buffer = "activation_grad"}, !mt.tensor<[hidden=4, ffn=2], f32> {mt.grad = @w})
// CHECK: %[[Y:.*]] = mt.contract %{{.*}}, %[[W]] over [hidden]
// CHECK: mtp.all_gather %{{.*}} over "tp" along "ffn"
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, pp = 2>} {
  mt.param @w : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @chunk0.backward(%x: !mt.tensor<[seq=2, hidden=4], f32> {mt.buffer = "residual", mt.index = 0 : i64},
                             %w: !mt.tensor<[hidden=4, ffn=4], f32> {mt.param = @w})
      -> (!mt.tensor<[seq=2, ffn=4], f32> {mt.buffer = "activation_grad"}, !mt.tensor<[hidden=4, ffn=4], f32> {mt.grad = @w})
      attributes {mt.pipeline_chunk = 0 : i64} {
    %y = mt.contract %x, %w over [hidden] : <[seq=2, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[seq=2, ffn=4], f32>
    %g = mt.mul %w, %w : <[hidden=4, ffn=4], f32>, <[hidden=4, ffn=4], f32> -> <[hidden=4, ffn=4], f32>
    return %y, %g : !mt.tensor<[seq=2, ffn=4], f32>, !mt.tensor<[hidden=4, ffn=4], f32>
  }
}

// -----

// Tests that under ep a pipeline chunk's residuals and stash, which stay on the rank, keep the
// data's split over ep (batch) across its functions: the forward returns its part of the
// residual (no gather; the integer routing indices could not be gathered), the backward
// takes it split, while the activation sent to the next stage leaves whole.
// CHECK-LABEL: func.func @chunk0.forward
// CHECK-SAME: -> (!mt.tensor<[batch=4, hidden=4], f32> {mt.buffer = "activation"}, !mt.tensor<[batch=2, hidden=4], i32> {mt.buffer = "residual", mt.index = 0 : i64}, !mt.tensor<[batch=2, hidden=4], f32> {mt.buffer = "stash", mt.index = 0 : i64})
// CHECK-NOT: i32, <[ep = 2]>, split {batch = [ep]}> -> <[batch=4, hidden=4], i32
// CHECK: mtp.all_gather {{.*}} over "ep" along "batch" : <[batch=4, hidden=4], f32
// CHECK-NOT: mtp.all_gather
// CHECK: return
// CHECK-LABEL: func.func @chunk0.backward
// CHECK-SAME: (%{{.*}}: !mt.tensor<[batch=2, hidden=4], i32> {mt.buffer = "residual", mt.index = 0 : i64}, %{{.*}}: !mt.tensor<[batch=2, hidden=4], f32> {mt.buffer = "stash", mt.index = 0 : i64}
// CHECK-NOT: mtp.all_slice
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2, pp = 2>} {
  mt.param @w : !mt.tensor<[experts=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @chunk0.forward(%x: !mt.tensor<[batch=4, hidden=4], f32> {mt.buffer = "tokens"},
                            %i: !mt.tensor<[batch=4, hidden=4], i32> {mt.buffer = "labels"},
                            %w: !mt.tensor<[experts=4, hidden=4], f32> {mt.param = @w})
      -> (!mt.tensor<[batch=4, hidden=4], f32> {mt.buffer = "activation"},
          !mt.tensor<[batch=4, hidden=4], i32> {mt.buffer = "residual", mt.index = 0 : i64},
          !mt.tensor<[batch=4, hidden=4], f32> {mt.buffer = "stash", mt.index = 0 : i64})
      attributes {mt.pipeline_chunk = 0 : i64} {
    %y = mt.mul %x, %x : <[batch=4, hidden=4], f32>, <[batch=4, hidden=4], f32> -> <[batch=4, hidden=4], f32>
    return %y, %i, %y : !mt.tensor<[batch=4, hidden=4], f32>, !mt.tensor<[batch=4, hidden=4], i32>, !mt.tensor<[batch=4, hidden=4], f32>
  }
  func.func @chunk0.backward(%i: !mt.tensor<[batch=4, hidden=4], i32> {mt.buffer = "residual", mt.index = 0 : i64},
                             %s: !mt.tensor<[batch=4, hidden=4], f32> {mt.buffer = "stash", mt.index = 0 : i64},
                             %w: !mt.tensor<[experts=4, hidden=4], f32> {mt.param = @w})
      -> !mt.tensor<[], f32> attributes {mt.pipeline_chunk = 0 : i64} {
    %c = mt.cast %i : <[batch=4, hidden=4], i32> to <[batch=4, hidden=4], f32>
    %p = mt.mul %c, %s : <[batch=4, hidden=4], f32>, <[batch=4, hidden=4], f32> -> <[batch=4, hidden=4], f32>
    %l = mt.reduce_sum %p over [batch, hidden] : <[batch=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a tensor-parallel degree whose layout (Megatron's) splits no parameter is
// refused, naming the dimensions it looked for and how to name others.
// expected-error @+1 {{tp 2 shards nothing: no parameter has a dimension of Megatron's layout (ffn, heads, kv_heads, vocab); name this model's dimensions to split with --layout '<dim>:tp,...' (or `layout { <dim>: tp }` in parallel {})}}
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @emb : !mt.tensor<[tok=16, width=4], f32> init normal(2.000000e-02)
}

// -----

// Tests the same with an explicit layout: it names the dimensions it maps.
// expected-error @+1 {{tp 2 shards nothing: no parameter has a dimension the layout maps to tp (inner, tok)}}
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, layout = {inner: tp, tok: tp}>} {
  mt.param @w : !mt.tensor<[width=4], f32> init ones
}

// -----

// Tests that a module that is not outlined is refused.
// expected-error @+1 {{mtp-partition needs an outlined module (run -mt-outline-parameters first)}}
module attributes {mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wq : !mt.tensor<[heads=4], f32> init zeros
}

// -----

// Tests a parameter whose split does not divide.
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 4>} {
  // expected-error @+1 {{parameter @wq cannot be laid out on the mesh: dimension 'heads' of size 6 cannot be split into 4 equal parts}}
  mt.param @wq : !mt.tensor<[heads=6], f32> init zeros
}

// -----

// Tests that without tensor parallelism the pass changes nothing.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: !mt.tensor<[vocab=16, hidden=4], f32>
// CHECK-NOT: mtp.
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 1>} {
  mt.param @wte : !mt.tensor<[vocab=16, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%wte: !mt.tensor<[vocab=16, hidden=4], f32> {mt.param = @wte}) -> !mt.tensor<[], f32> {
    %m = mt.reduce_mean %wte over [vocab, hidden] : <[vocab=16, hidden=4], f32> -> <[], f32>
    return %m : !mt.tensor<[], f32>
  }
}

// -----

// Tests the distributed optimizer (dp 2, tp 2): the optimizer step takes each gradient and
// state sharded over dp along the first dimension tp does not split (wq: layers; g:
// hidden) and the parameters whole over dp; the parameter is sliced to that layout as the
// step enters (no communication) and the update runs on the shard, the squared norms are
// summed over dp (and tp), and the new parameters are all-gathered over dp.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: %arg2: !mt.tensor<[layers=1, heads=2], f32> {mt.grad = @wq}, %arg3: !mt.tensor<[hidden=2], f32> {mt.grad = @g}
// CHECK-SAME: %arg4: !mt.tensor<[layers=2, heads=2], f32> {mt.param = @wq}
// CHECK-SAME: %arg5: !mt.tensor<[layers=1, heads=2], f32> {mt.state = @wq.m}
// CHECK-NEXT: %[[W:.*]] = mtp.from_local %arg4
// CHECK-NEXT: %[[WS:.*]] = mtp.all_slice %[[W]] over "dp" along "layers"
// CHECK-NEXT: %[[WL:.*]] = mtp.to_local %[[WS]] {{.*}} -> <[layers=1, heads=2], f32>
// CHECK: mtp.all_reduce {{.*}} over ["dp"] : <[], f32, <[dp = 2, tp = 2]>, partial [dp, tp]>
// CHECK: mtp.all_reduce {{.*}} over ["tp"] : <[], f32, <[dp = 2, tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce {{.*}} over ["dp"] : <[], f32, <[dp = 2, tp = 2]>, partial [dp]>
// CHECK-NOT: mtp.all_slice
// CHECK: %[[NEW:.*]] = mt.sub %[[WL]], {{.*}} -> <[layers=1, heads=2], f32>
// CHECK: %[[V:.*]] = mtp.from_local %[[NEW]]
// CHECK: mtp.all_gather %[[V]] over "dp" along "layers" {{.*}} -> <[layers=2, heads=4], f32, <[dp = 2, tp = 2]>, split {heads = [tp]}>
// CHECK: return {{.*}} : !mt.tensor<[], f32>, !mt.tensor<[layers=2, heads=2], f32>, !mt.tensor<[layers=1, heads=2], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, dp = 2, distributed_optimizer = true>} {
  mt.param @wq : !mt.tensor<[layers=2, heads=4], f32> init normal(2.000000e-02)
  mt.state @wq.m of @wq : !mt.tensor<[layers=2, heads=4], f32>
  mt.param @g : !mt.tensor<[hidden=4], f32> init ones
  func.func @optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>,
                            %dwq: !mt.tensor<[layers=2, heads=4], f32> {mt.grad = @wq},
                            %dg: !mt.tensor<[hidden=4], f32> {mt.grad = @g},
                            %wq: !mt.tensor<[layers=2, heads=4], f32> {mt.param = @wq},
                            %m: !mt.tensor<[layers=2, heads=4], f32> {mt.state = @wq.m})
      -> (!mt.tensor<[], f32>, !mt.tensor<[layers=2, heads=4], f32> {mt.param = @wq},
          !mt.tensor<[layers=2, heads=4], f32> {mt.state = @wq.m})
      attributes {mt.grads = [@wq, @g], mt.optimizer} {
    %sq1 = mt.mul %dwq, %dwq : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    %n1 = mt.reduce_sum %sq1 over [layers, heads] : <[layers=2, heads=4], f32> -> <[], f32>
    %sq2 = mt.mul %dg, %dg : <[hidden=4], f32>, <[hidden=4], f32> -> <[hidden=4], f32>
    %n2 = mt.reduce_sum %sq2 over [hidden] : <[hidden=4], f32> -> <[], f32>
    %n = mt.add %n1, %n2 : <[], f32>, <[], f32> -> <[], f32>
    %m2 = mt.add %m, %dwq : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    %w = mt.sub %wq, %m2 : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    return %n, %w, %m2 : !mt.tensor<[], f32>, !mt.tensor<[layers=2, heads=4], f32>, !mt.tensor<[layers=2, heads=4], f32>
  }
}

// -----

// Tests that the distributed optimizer decays each rank's shard, not the whole parameter:
// the parameter enters whole over dp and is sliced to its optimizer layout (the gradient's
// and the states') before anything computes on it, so the weight decay's product, the
// update and the new parameter are all [layers=1] and only the new parameter is
// all-gathered. A parameter the step only returns is not sliced (nor gathered).
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: %arg2: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @w}
// CHECK-SAME: %arg4: !mt.tensor<[hidden=4], f32> {mt.param = @g}
// CHECK-NEXT: %[[W:.*]] = mtp.from_local %arg2 : <[layers=2, hidden=4], f32> -> <[layers=2, hidden=4], f32, <[dp = 2]>>
// CHECK-NEXT: %[[WS:.*]] = mtp.all_slice %[[W]] over "dp" along "layers" : {{.*}} -> <[layers=2, hidden=4], f32, <[dp = 2]>, split {layers = [dp]}>
// CHECK-NEXT: %[[P:.*]] = mtp.to_local %[[WS]] {{.*}} -> <[layers=1, hidden=4], f32>
// CHECK-NEXT: %[[WD:.*]] = mt.constant 1.000000e-01
// CHECK-NEXT: %[[DECAY:.*]] = mt.mul %[[WD]], %[[P]] : <[], f32>, <[layers=1, hidden=4], f32> -> <[layers=1, hidden=4], f32>
// CHECK-NEXT: %[[UPDATE:.*]] = mt.add %arg1, %[[DECAY]] : <[layers=1, hidden=4], f32>, <[layers=1, hidden=4], f32> -> <[layers=1, hidden=4], f32>
// CHECK-NEXT: %[[STEP:.*]] = mt.mul %arg0, %[[UPDATE]] : <[], f32>, <[layers=1, hidden=4], f32> -> <[layers=1, hidden=4], f32>
// CHECK-NEXT: %[[NEW:.*]] = mt.sub %[[P]], %[[STEP]] : <[layers=1, hidden=4], f32>, <[layers=1, hidden=4], f32> -> <[layers=1, hidden=4], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[NEW]]
// CHECK-NEXT: %[[G:.*]] = mtp.all_gather %[[V]] over "dp" along "layers" {{.*}} -> <[layers=2, hidden=4], f32, <[dp = 2]>>
// CHECK-NEXT: %[[L:.*]] = mtp.to_local %[[G]]
// CHECK-NEXT: return %[[L]], %arg4 : !mt.tensor<[layers=2, hidden=4], f32>, !mt.tensor<[hidden=4], f32>
module attributes {mt.outlined, mt.parallel = #mt.parallel<dp = 2, distributed_optimizer = true>} {
  mt.param @w : !mt.tensor<[layers=2, hidden=4], f32> init normal(2.000000e-02)
  mt.param @g : !mt.tensor<[hidden=4], f32> init ones
  func.func @optimizer_step(%lr: !mt.tensor<[], f32>,
                            %dw: !mt.tensor<[layers=2, hidden=4], f32> {mt.grad = @w},
                            %w: !mt.tensor<[layers=2, hidden=4], f32> {mt.param = @w},
                            %dg: !mt.tensor<[hidden=4], f32> {mt.grad = @g},
                            %g: !mt.tensor<[hidden=4], f32> {mt.param = @g})
      -> (!mt.tensor<[layers=2, hidden=4], f32> {mt.param = @w},
          !mt.tensor<[hidden=4], f32> {mt.param = @g})
      attributes {mt.grads = [@w, @g], mt.optimizer} {
    %wd = mt.constant 1.000000e-01 : <[], f32>
    %decay = mt.mul %wd, %w : <[], f32>, <[layers=2, hidden=4], f32> -> <[layers=2, hidden=4], f32>
    %update = mt.add %dw, %decay : <[layers=2, hidden=4], f32>, <[layers=2, hidden=4], f32> -> <[layers=2, hidden=4], f32>
    %step = mt.mul %lr, %update : <[], f32>, <[layers=2, hidden=4], f32> -> <[layers=2, hidden=4], f32>
    %new = mt.sub %w, %step : <[layers=2, hidden=4], f32>, <[layers=2, hidden=4], f32> -> <[layers=2, hidden=4], f32>
    return %new, %g : !mt.tensor<[layers=2, hidden=4], f32>, !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a pipeline stage's optimizer functions (mt.optimizer, any name) take their
// gradients (mt.grad) and states in the optimizer layout like @optimizer_step: sharded
// over dp along the stage's layers, the parameter whole over dp; grad_squares sums the
// shards' squares over dp (and tp) into its replicated result. A function without
// mt.optimizer (a chunk's backward) keeps its gradient in the parameter layout.
// CHECK-LABEL: func.func @chunk0.backward
// CHECK-SAME: -> (!mt.tensor<[layers=2, heads=2], f32> {mt.grad = @wq})
// CHECK-LABEL: func.func @stage0.grad_squares
// CHECK-SAME: %arg1: !mt.tensor<[layers=1, heads=2], f32> {mt.grad = @wq}
// CHECK: mtp.all_reduce {{.*}} over ["dp"]
// CHECK: return {{.*}} : !mt.tensor<[], f32>
// CHECK-LABEL: func.func @stage0.optimizer_step
// CHECK-SAME: %arg3: !mt.tensor<[layers=1, heads=2], f32> {mt.grad = @wq}
// CHECK-SAME: %arg4: !mt.tensor<[layers=2, heads=2], f32> {mt.param = @wq}
// CHECK-SAME: %arg5: !mt.tensor<[layers=1, heads=2], f32> {mt.state = @wq.m}
// CHECK: mtp.all_gather {{.*}} over "dp" along "layers"
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, dp = 2, distributed_optimizer = true>} {
  mt.param @wq : !mt.tensor<[layers=4, heads=4], f32> init normal(2.000000e-02)
  mt.state @wq.m of @wq : !mt.tensor<[layers=4, heads=4], f32>
  func.func @chunk0.backward(%g: !mt.tensor<[layers=2, heads=4], f32>)
      -> (!mt.tensor<[layers=2, heads=4], f32> {mt.grad = @wq})
      attributes {mt.pipeline_chunk = 0 : i64, mt.grads = [@wq]} {
    return %g : !mt.tensor<[layers=2, heads=4], f32>
  }
  func.func @stage0.grad_squares(%scale: !mt.tensor<[], f32> {mt.buffer = "grad_scale"},
                                 %dwq: !mt.tensor<[layers=2, heads=4], f32> {mt.grad = @wq})
      -> (!mt.tensor<[], f32> {mt.buffer = "grad_squares"})
      attributes {mt.optimizer, mt.pipeline_stage = 0 : i64} {
    %sq = mt.mul %dwq, %dwq : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    %n = mt.reduce_sum %sq over [layers, heads] : <[layers=2, heads=4], f32> -> <[], f32>
    return %n : !mt.tensor<[], f32>
  }
  func.func @stage0.optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>,
                                   %norm: !mt.tensor<[], f32>,
                                   %dwq: !mt.tensor<[layers=2, heads=4], f32> {mt.grad = @wq},
                                   %wq: !mt.tensor<[layers=2, heads=4], f32> {mt.param = @wq},
                                   %m: !mt.tensor<[layers=2, heads=4], f32> {mt.state = @wq.m})
      -> (!mt.tensor<[], f32>, !mt.tensor<[layers=2, heads=4], f32> {mt.param = @wq},
          !mt.tensor<[layers=2, heads=4], f32> {mt.state = @wq.m})
      attributes {mt.optimizer, mt.pipeline_stage = 0 : i64} {
    %m2 = mt.add %m, %dwq : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    %w = mt.sub %wq, %m2 : <[layers=2, heads=4], f32>, <[layers=2, heads=4], f32> -> <[layers=2, heads=4], f32>
    return %step, %w, %m2 : !mt.tensor<[], f32>, !mt.tensor<[layers=2, heads=4], f32>, !mt.tensor<[layers=2, heads=4], f32>
  }
}

// -----

// Tests that the distributed optimizer needs data-parallel ranks to shard over.
// expected-error @+1 {{the distributed optimizer shards the optimizer state over data-parallel ranks: set dp above 1}}
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, distributed_optimizer = true>} {
}

// -----

// Tests that moving a split from one dimension to another is one all_to_all: with sequence
// parallelism the reduce-scattered activation is split along seq; the row-parallel output
// projection splits heads (which outranks seq) over the same axis, so its operand's tp
// moves from seq to heads, not an all_gather of the sequence and an all_slice of the heads.
// CHECK-LABEL: func.func @forward
// CHECK: mtp.reduce_scatter {{.*}} over "tp" along "seq"
// CHECK: %[[S:.*]] = mt.split %{{.*}} hidden into [heads, head_dim] : <[seq=2, hidden=4], f32> -> <[seq=2, heads=2, head_dim=2], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[S]] : <[seq=2, heads=2, head_dim=2], f32> -> <[seq=4, heads=2, head_dim=2], f32, <[tp = 2]>, split {seq = [tp]}>
// CHECK-NEXT: %[[A:.*]] = mtp.all_to_all %[[V]] over "tp" from "seq" to "heads" : <[seq=4, heads=2, head_dim=2], f32, <[tp = 2]>, split {seq = [tp]}> -> <[seq=4, heads=2, head_dim=2], f32, <[tp = 2]>, split {heads = [tp]}>
// CHECK-NEXT: %[[L:.*]] = mtp.to_local %[[A]] : {{.*}} -> <[seq=4, heads=1, head_dim=2], f32>
// CHECK-NEXT: mt.contract %[[L]], %arg3 over [heads, head_dim] : <[seq=4, heads=1, head_dim=2], f32>, <[heads=1, head_dim=2, hidden=4], f32> -> <[seq=4, hidden=4], f32>
// CHECK-NOT: mtp.all_gather
// CHECK-NOT: mtp.all_slice
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, sp = true>} {
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @b2 : !mt.tensor<[hidden=4], f32> init zeros
  mt.param @wo : !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=4, ffn=8], f32>,
                     %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @w2},
                     %b2: !mt.tensor<[hidden=4], f32> {mt.param = @b2},
                     %wo: !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> {mt.param = @wo}) -> !mt.tensor<[], f32> {
    %y = mt.contract %x, %w2 over [ffn] : <[seq=4, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %z = mt.add %y, %b2 : <[seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %s = mt.split %z hidden into [heads, head_dim] : <[seq=4, hidden=4], f32> -> <[seq=4, heads=2, head_dim=2], f32>
    %o = mt.contract %s, %wo over [heads, head_dim] : <[seq=4, heads=2, head_dim=2], f32>, <[heads=2, head_dim=2, hidden=4], f32> -> <[seq=4, hidden=4], f32>
    %l = mt.reduce_sum %o over [seq, hidden] : <[seq=4, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the same move under a layout that maps two dimensions to tp (an expert dispatch):
// the tokens take the capacity split of the positions they are added to; the expert
// contraction splits experts (tied in priority, experts come first in its result), so the
// tokens move from their capacity slot to their expert's rank by one all_to_all.
// CHECK-LABEL: func.func @forward
// CHECK: %[[D:.*]] = mt.add {{.*}} -> <[experts=2, capacity=2, hidden=4], f32>
// CHECK-NEXT: %[[V:.*]] = mtp.from_local %[[D]] : {{.*}} -> <[experts=2, capacity=4, hidden=4], f32, <[tp = 2]>, split {capacity = [tp]}>
// CHECK-NEXT: %[[A:.*]] = mtp.all_to_all %[[V]] over "tp" from "capacity" to "experts" : {{.*}} -> <[experts=2, capacity=4, hidden=4], f32, <[tp = 2]>, split {experts = [tp]}>
// CHECK-NEXT: %[[L:.*]] = mtp.to_local %[[A]] : {{.*}} -> <[experts=1, capacity=4, hidden=4], f32>
// CHECK-NEXT: mt.contract %[[L]], %arg2 over [hidden] : <[experts=1, capacity=4, hidden=4], f32>, <[experts=1, hidden=4, ffn=8], f32> -> <[experts=1, capacity=4, ffn=8], f32>
// CHECK-NOT: mtp.all_gather
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, layout = {experts: tp, capacity: tp}>} {
  mt.param @pos : !mt.tensor<[capacity=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @w1 : !mt.tensor<[experts=2, hidden=4, ffn=8], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[experts=2, capacity=4, hidden=4], f32>,
                     %pos: !mt.tensor<[capacity=4, hidden=4], f32> {mt.param = @pos},
                     %w1: !mt.tensor<[experts=2, hidden=4, ffn=8], f32> {mt.param = @w1}) -> !mt.tensor<[], f32> {
    %d = mt.add %x, %pos : <[experts=2, capacity=4, hidden=4], f32>, <[capacity=4, hidden=4], f32> -> <[experts=2, capacity=4, hidden=4], f32>
    %h = mt.contract %d, %w1 over [hidden] : <[experts=2, capacity=4, hidden=4], f32>, <[experts=2, hidden=4, ffn=8], f32> -> <[experts=2, capacity=4, ffn=8], f32>
    %l = mt.reduce_sum %h over [experts, capacity, ffn] : <[experts=2, capacity=4, ffn=8], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests sequence parallelism under context parallelism (cp 2 x tp 2, sp): the sequence is
// split over cp from the entry and, in the sp regions, each cp part over tp as well
// (seq = [cp, tp]). The row-parallel output is reduce-scattered over tp along the cp part
// it has, the residual (split over cp only) is sliced over tp to meet it, dropout numbers
// its mask by the two-axis layout, the column-parallel contraction all-gathers only tp
// (cp stays), and a mean over the [cp, tp]-split sequence is partial over both axes.
// CHECK-LABEL: func.func @forward
// CHECK: mtp.all_slice {{.*}} over "cp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>> -> <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp]}>
// CHECK: mt.contract {{.*}} over [ffn] : <[seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[seq=4, hidden=4], f32>
// CHECK-NEXT: mtp.from_local
// CHECK-NEXT: %[[RS:.*]] = mtp.reduce_scatter {{.*}} over "tp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp]}, partial [tp]> -> <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}>
// CHECK: mtp.all_slice {{.*}} over "tp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp]}> -> <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}>
// CHECK: %[[Z:.*]] = mt.add {{.*}} : <[seq=2, hidden=4], f32>, <[seq=2, hidden=4], f32> -> <[seq=2, hidden=4], f32>
// CHECK-NEXT: %[[D:.*]] = mt.dropout %[[Z]] rate 1.000000e-01 stream 0 {mtp.layout = !mtp.tensor<[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}>} : <[seq=2, hidden=4], f32>
// CHECK-NEXT: mtp.from_local %[[D]]
// CHECK-NEXT: mtp.all_gather {{.*}} over "tp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}> -> <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp]}>
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: mt.contract {{.*}} over [hidden] : <[seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[seq=4, ffn=4], f32>
// CHECK-NEXT: mt.reduce_mean %[[D]] over [seq, hidden] : <[seq=2, hidden=4], f32> -> <[], f32>
// CHECK-NEXT: mt.constant 2.500000e-01
// CHECK: mtp.all_reduce {{.*}} over ["cp"] : <[], f32, <[cp = 2, tp = 2]>, partial [cp, tp]>
// CHECK-NEXT: mtp.all_reduce {{.*}} over ["tp"] : <[], f32, <[cp = 2, tp = 2]>, partial [tp]>
// CHECK-NOT: mtp.all_gather
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, cp = 2, sp = true>} {
  mt.param @w1 : !mt.tensor<[hidden=4, ffn=8], f32> init normal(2.000000e-02)
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=8, hidden=4], f32>,
                     %w1: !mt.tensor<[hidden=4, ffn=8], f32> {mt.param = @w1},
                     %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @w2}) -> !mt.tensor<[], f32> {
    %h = mt.contract %x, %w1 over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, ffn=8], f32> -> <[seq=8, ffn=8], f32>
    %g = mt.gelu %h : <[seq=8, ffn=8], f32>
    %y = mt.contract %g, %w2 over [ffn] : <[seq=8, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %z = mt.add %y, %x : <[seq=8, hidden=4], f32>, <[seq=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %d = mt.dropout %z rate 1.000000e-01 stream 0 : <[seq=8, hidden=4], f32>
    %h2 = mt.contract %d, %w1 over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, ffn=8], f32> -> <[seq=8, ffn=8], f32>
    %a = mt.reduce_mean %d over [seq, hidden] : <[seq=8, hidden=4], f32> -> <[], f32>
    %b = mt.reduce_sum %h2 over [seq, ffn] : <[seq=8, ffn=8], f32> -> <[], f32>
    %l = mt.add %a, %b : <[], f32>, <[], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests the weight gradients of the sp region under cp 2 x tp 2: the column-parallel
// weight's gradient contracts the [cp, tp]-split sequence with a gradient split along
// ffn over tp; ffn outranks seq for tp, so seq gives up tp alone (all-gathered over tp,
// still split over cp) and the result is partial over cp. The norm weight's gradient, a
// sum over the [cp, tp]-split sequence, is partial over both and all-reduced over each.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[N:.*]] = mt.mul {{.*}} : <[seq=2, hidden=4], f32>, <[hidden=4], f32> -> <[seq=2, hidden=4], f32>
// CHECK: mtp.from_local %[[N]]
// CHECK-NEXT: mtp.all_gather {{.*}} over "tp" along "seq" : <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}> -> <[seq=8, hidden=4], f32, <[cp = 2, tp = 2]>, split {seq = [cp]}>
// CHECK-NEXT: %[[G:.*]] = mtp.to_local
// CHECK-NEXT: %[[DW:.*]] = mt.contract %[[G]], {{.*}} over [seq] : <[seq=4, hidden=4], f32>, <[seq=4, ffn=4], f32> -> <[hidden=4, ffn=4], f32>
// CHECK-NEXT: %[[DG:.*]] = mt.reduce_sum %[[N]] over [seq] : <[seq=2, hidden=4], f32> -> <[hidden=4], f32>
// CHECK: mtp.from_local %[[DW]] : <[hidden=4, ffn=4], f32> -> <[hidden=4, ffn=8], f32, <[cp = 2, tp = 2]>, split {ffn = [tp]}, partial [cp]>
// CHECK-NEXT: mtp.all_reduce {{.*}} over ["cp"]
// CHECK: mtp.from_local %[[DG]] : <[hidden=4], f32> -> <[hidden=4], f32, <[cp = 2, tp = 2]>, partial [cp, tp]>
// CHECK-NEXT: mtp.all_reduce {{.*}} over ["cp"]
// CHECK-NEXT: mtp.all_reduce {{.*}} over ["tp"]
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, cp = 2, sp = true>} {
  mt.param @g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @w1 : !mt.tensor<[hidden=4, ffn=8], f32> init normal(2.000000e-02)
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward_backward(%x: !mt.tensor<[seq=8, hidden=4], f32>, %a: !mt.tensor<[seq=8, ffn=8], f32>,
                              %g: !mt.tensor<[hidden=4], f32> {mt.param = @g},
                              %w1: !mt.tensor<[hidden=4, ffn=8], f32> {mt.param = @w1},
                              %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @w2})
      -> (!mt.tensor<[], f32>, !mt.tensor<[hidden=4, ffn=8], f32>, !mt.tensor<[hidden=4], f32>)
      attributes {mt.grads = [@w1, @g]} {
    %y = mt.contract %a, %w2 over [ffn] : <[seq=8, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %r = mt.add %y, %x : <[seq=8, hidden=4], f32>, <[seq=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %n = mt.mul %r, %g : <[seq=8, hidden=4], f32>, <[hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %dh = mt.contract %x, %w1 over [hidden] : <[seq=8, hidden=4], f32>, <[hidden=4, ffn=8], f32> -> <[seq=8, ffn=8], f32>
    %dw = mt.contract %n, %dh over [seq] : <[seq=8, hidden=4], f32>, <[seq=8, ffn=8], f32> -> <[hidden=4, ffn=8], f32>
    %dg = mt.reduce_sum %n over [seq] : <[seq=8, hidden=4], f32> -> <[hidden=4], f32>
    %l = mt.reduce_sum %dh over [seq, ffn] : <[seq=8, ffn=8], f32> -> <[], f32>
    return %l, %dw, %dg : !mt.tensor<[], f32>, !mt.tensor<[hidden=4, ffn=8], f32>, !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that under cp 2 x tp 2 with sp an axis moving from a two-axis split is its inner
// one: the output projection splits heads over tp, so tp leaves the sequence's [cp, tp]
// split for heads by one all_to_all and the sequence keeps its cp part.
// CHECK-LABEL: func.func @forward
// CHECK: mtp.reduce_scatter {{.*}} over "tp" along "seq"
// CHECK: mt.split %{{.*}} hidden into [heads, head_dim] : <[seq=2, hidden=4], f32> -> <[seq=2, heads=2, head_dim=2], f32>
// CHECK-NEXT: mtp.from_local
// CHECK-NEXT: mtp.all_to_all {{.*}} over "tp" from "seq" to "heads" : <[seq=8, heads=2, head_dim=2], f32, <[cp = 2, tp = 2]>, split {seq = [cp, tp]}> -> <[seq=8, heads=2, head_dim=2], f32, <[cp = 2, tp = 2]>, split {heads = [tp], seq = [cp]}>
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: mt.contract {{.*}} over [heads, head_dim] : <[seq=4, heads=1, head_dim=2], f32>, <[heads=1, head_dim=2, hidden=4], f32> -> <[seq=4, hidden=4], f32>
// CHECK-NOT: mtp.all_gather
// CHECK-NOT: mtp.all_slice
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, cp = 2, sp = true>} {
  mt.param @w2 : !mt.tensor<[ffn=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wo : !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[seq=8, ffn=8], f32>,
                     %w2: !mt.tensor<[ffn=8, hidden=4], f32> {mt.param = @w2},
                     %wo: !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> {mt.param = @wo}) -> !mt.tensor<[], f32> {
    %y = mt.contract %x, %w2 over [ffn] : <[seq=8, ffn=8], f32>, <[ffn=8, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %z = mt.gelu %y : <[seq=8, hidden=4], f32>
    %s = mt.split %z hidden into [heads, head_dim] : <[seq=8, hidden=4], f32> -> <[seq=8, heads=2, head_dim=2], f32>
    %o = mt.contract %s, %wo over [heads, head_dim] : <[seq=8, heads=2, head_dim=2], f32>, <[heads=2, head_dim=2, hidden=4], f32> -> <[seq=8, hidden=4], f32>
    %l = mt.reduce_sum %o over [seq, hidden] : <[seq=8, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that an expert tensor-parallel degree other than tp and 1 is refused.
// expected-error @+1 {{etp 2 is not supported: the expert weights are split over tp like the dense ones (etp = tp = 4) or whole, tp folded into expert parallelism (etp = 1)}}
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 4, ep = 2, etp = 2>} {
  mt.param @we : !mt.tensor<[experts=2, hidden=4, ffn=8], f32> init normal(2.000000e-02)
}

// -----

// Tests ring attention (cp_comm_type p2p) under cp 2 with causal attention: the sequence is
// split in two chunks per rank (the mesh's cp is two_chunk: rank c holds chunks c and 3 - c).
// Each rank keeps its query block; its own key and value block is step 0, computed whole
// under the causal mask of the global positions (an iota of this rank's part). Then the
// key and value blocks move one rank around the ring (their positions no longer travel),
// and the step computes two unmasked [2, 2] chunk pairs: (second query chunk, first key
// chunk) always, and the pair a 0/1 weight chooses from this rank's first position
// (first with first when the block's rank is before this one, second with second when
// after), merged into the running maximum, normaliser and output of each query chunk
// (online softmax); the output's chunks are stacked back into the sequence.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK: %[[K:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK: %[[V:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK: %[[POS:.*]] = mt.iota dim seq {mtp.layout = !mtp.tensor<[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>} : <[seq=4], f32>
// CHECK: %[[SECOND:.*]] = mt.iota dim seq_chunk : <[seq_chunk=2], f32>
// CHECK: %[[FIRST:.*]] = mt.sub %{{.*}}, %[[SECOND]]
// CHECK: %[[QS:.*]] = mt.split %[[Q]] seq into [seq_chunk, seq_half]
// CHECK-NEXT: %[[QM:.*]] = mt.mul %[[QS]], %[[FIRST]]
// CHECK-NEXT: %[[Q0:.*]] = mt.reduce_sum %[[QM]] over [seq_chunk] : {{.*}} -> <[seq_half=2, heads=2, head_dim=4], f32>
// CHECK: %[[Q1:.*]] = mt.reduce_sum {{.*}} over [seq_chunk] : {{.*}} -> <[seq_half=2, heads=2, head_dim=4], f32>
// CHECK: %[[NEG:.*]] = mt.neg %[[POS]]
// CHECK-NEXT: %[[NMAX:.*]] = mt.reduce_max %[[NEG]] over [seq]
// CHECK-NEXT: %[[FIRSTPOS:.*]] = mt.neg %[[NMAX]] : <[], f32>
// CHECK: mt.greater %{{.*}}, %[[POS]] : <[seq_kv=4], f32>, <[seq=4], f32>
// CHECK: mtp.shift {{.*}} over "cp" offset 1 rotate : <[seq=8, heads=2, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mtp.shift {{.*}} over "cp" offset 1 rotate : <[seq=8, heads=2, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: mtp.shift
// CHECK: %[[HALFWAY:.*]] = mt.constant 1.500000e+00
// CHECK-NEXT: %[[W:.*]] = mt.greater %[[FIRSTPOS]], %[[HALFWAY]] : <[], f32>, <[], f32> -> <[], f32>
// CHECK: %[[QW:.*]] = mt.add {{.*}} : <[seq_half=2, heads=2, head_dim=4], f32>, <[seq_half=2, heads=2, head_dim=4], f32>
// CHECK: %[[K0:.*]] = mt.reduce_sum {{.*}} over [seq_chunk] : {{.*}} -> <[seq_kv_half=2, heads=2, head_dim=4], f32>
// CHECK: %[[KW:.*]] = mt.add {{.*}} : <[seq_kv_half=2, heads=2, head_dim=4], f32>, <[seq_kv_half=2, heads=2, head_dim=4], f32>
// CHECK: mt.contract %[[Q1]], %[[K0]] over [head_dim] : <[seq_half=2, heads=2, head_dim=4], f32>, <[seq_kv_half=2, heads=2, head_dim=4], f32> -> <[seq_half=2, heads=2, seq_kv_half=2], f32>
// CHECK-NOT: mt.greater
// CHECK: mt.contract %[[QW]], %[[KW]] over [head_dim] : <[seq_half=2, heads=2, head_dim=4], f32>, <[seq_kv_half=2, heads=2, head_dim=4], f32> -> <[seq_half=2, heads=2, seq_kv_half=2], f32>
// CHECK-NOT: mt.greater
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, heads=2, head_dim=4], f32> -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NOT: mtp.shift
// CHECK-NOT: mtp.all_gather
// CHECK: mtp.all_reduce {{.*}} over ["cp"]
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %k: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %v: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>) -> !mt.tensor<[], f32> {
    %o = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>
    %l = mt.reduce_sum %o over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests ring attention's backward under cp 2 (grouped-query, not causal, so no positions
// travel): the forward's two steps again (key and value shifted once), then the gradient
// steps from this rank's own block: the key and value blocks shift once more, the key and
// value gradient blocks computed at step 0 travel with them and take one more step home
// after the last; the query gradient stays.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: mt.iota
// CHECK: mt.log
// CHECK-COUNT-4: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: %[[DK:.*]] = mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK-NEXT: %[[DKL:.*]] = mtp.to_local %[[DK]]
// CHECK: %[[DV:.*]] = mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK-NEXT: %[[DVL:.*]] = mtp.to_local %[[DV]]
// CHECK-NOT: mtp.shift
// CHECK: mt.reduce_sum %[[DKL]]
// CHECK: mt.reduce_sum %[[DVL]]
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %k: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %v: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %do: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>) -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>
    %lq = mt.reduce_sum %dq over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    %lk = mt.reduce_sum %dk over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    %lv = mt.reduce_sum %dv over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    return %lq, %lk, %lv : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
}
// -----

// Tests ring attention within documents (mt.attention's positions, --reset-attention-mask)
// under cp 2: the document ids are split as the query's rows; step 0 adds the document term
// (keys before the query's document: position minus id) to the causal mask; then the key
// positions travel with the key and value blocks (a third shift), and both chunk pairs of
// the balanced step add the document term too, from the query chunk's positions and ids
// and the key chunk's positions (their causal term is 0: every key of a pair comes before
// every query of it).
// CHECK-LABEL: func.func @forward
// CHECK: %[[IDS:.*]] = mtp.to_local {{.*}} : <[seq=8], i32, <[cp = 2 two_chunk]>, split {seq = [cp]}> -> <[seq=4], i32>
// CHECK: %[[POS:.*]] = mt.iota dim seq {mtp.layout = !mtp.tensor<[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>} : <[seq=4], f32>
// CHECK: mt.cast %[[IDS]] : <[seq=4], i32> to <[seq=4], f32>
// CHECK: mt.greater %{{.*}}, %[[POS]] : <[seq_kv=4], f32>, <[seq=4], f32> -> <[seq_kv=4, seq=4], f32>
// CHECK: %[[START:.*]] = mt.sub %[[POS]], %{{.*}} : <[seq=4], f32>, <[seq=4], f32> -> <[seq=4], f32>
// CHECK: mt.greater %[[START]], %{{.*}} : <[seq=4], f32>, <[seq_kv=4], f32> -> <[seq=4, seq_kv=4], f32>
// CHECK-COUNT-2: mtp.shift {{.*}} over "cp" offset 1 rotate : <[seq=8, heads=2, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mtp.shift {{.*}} over "cp" offset 1 rotate : <[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: mtp.shift
// CHECK: mt.contract {{.*}} -> <[seq_half=2, heads=2, seq_kv_half=2], f32>
// CHECK: mt.greater {{.*}} : <[seq_half=2], f32>, <[seq_kv_half=2], f32> -> <[seq_half=2, seq_kv_half=2], f32>
// CHECK: mt.contract {{.*}} -> <[seq_half=2, heads=2, seq_kv_half=2], f32>
// CHECK: mt.greater {{.*}} : <[seq_half=2], f32>, <[seq_kv_half=2], f32> -> <[seq_half=2, seq_kv_half=2], f32>
// CHECK-NOT: mtp.shift
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %k: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %v: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %ids: !mt.tensor<[seq=8], i32>) -> !mt.tensor<[], f32> {
    %o = mt.attention %q, %k, %v positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8], i32>
    %l = mt.reduce_sum %o over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests ring attention's backward within documents under cp 2: the forward's steps again
// and the gradient steps each shift the key positions with the key and value blocks, and
// the gradient steps' chunk pairs take the document term.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mtp.shift {{.*}} : <[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mt.log
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mtp.shift {{.*}} : <[seq=8], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mt.greater {{.*}} : <[seq_half=2], f32>, <[seq_kv_half=2], f32> -> <[seq_half=2, seq_kv_half=2], f32>
// CHECK: mt.greater {{.*}} : <[seq_half=2], f32>, <[seq_kv_half=2], f32> -> <[seq_half=2, seq_kv_half=2], f32>
// CHECK-COUNT-4: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: mtp.shift
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %k: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %v: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %do: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %ids: !mt.tensor<[seq=8], i32>) -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do positions %ids : !mt.tensor<[seq=8], i32> dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>
    %lq = mt.reduce_sum %dq over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    %lk = mt.reduce_sum %dk over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    %lv = mt.reduce_sum %dv over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    return %lq, %lk, %lv : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
}

// -----

// Tests that expert_load under ep 2 counts each rank's own tokens (the batch split of the
// routing group): the counts are partial over ep, and one i64 all_reduce sums them where the
// step returns them whole.
// CHECK-LABEL: func.func @forward
// CHECK: %[[V:.*]], %[[I:.*]] = mt.topk {{.*}} -> <[batch=2, seq=2, topk=2], f32>, <[batch=2, seq=2, topk=2], i32>
// CHECK: %[[N:.*]] = mt.expert_load %[[I]] k topk to experts : <[batch=2, seq=2, topk=2], i32> -> <[experts=4], i64>
// CHECK: %[[P:.*]] = mtp.from_local %[[N]] : {{.*}} -> <[experts=4], i64, <[ep = 2]>, partial [ep]>
// CHECK: %[[S:.*]] = mtp.all_reduce %[[P]] over ["ep"]
// CHECK: %[[W:.*]] = mtp.to_local %[[S]] : {{.*}} -> <[experts=4], i64>
// CHECK: return %{{.*}}, %[[W]]
module attributes {mt.outlined, mt.parallel = #mt.parallel<ep = 2>} {
  mt.param @router : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=4, seq=2, hidden=4], f32>,
                     %router: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router})
      -> (!mt.tensor<[], f32>, !mt.tensor<[experts=4], i64>) {
    %logits = mt.contract %x, %router over [hidden] : <[batch=4, seq=2, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=4, seq=2, experts=4], f32>
    %v, %i = mt.topk %logits over experts k topk : <[batch=4, seq=2, experts=4], f32> -> <[batch=4, seq=2, topk=2], f32>, <[batch=4, seq=2, topk=2], i32>
    %n = mt.expert_load %i k topk to experts : <[batch=4, seq=2, topk=2], i32> -> <[experts=4], i64>
    %s = mt.reduce_sum %v over [batch, seq, topk] : <[batch=4, seq=2, topk=2], f32> -> <[], f32>
    return %s, %n : !mt.tensor<[], f32>, !mt.tensor<[experts=4], i64>
  }
}

// -----

// Tests that expert_load without expert parallelism counts every token on every rank: its
// indices are whole (tp 2 splits nothing of the routing) and so are the counts, with no
// collective.
// CHECK-LABEL: func.func @forward
// CHECK: %[[N:.*]] = mt.expert_load %{{.*}} k topk to experts : <[batch=4, seq=2, topk=2], i32> -> <[experts=4], i64>
// CHECK-NOT: mtp.all_reduce
// CHECK: return %[[N]]
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  func.func @forward(%i: !mt.tensor<[batch=4, seq=2, topk=2], i32>) -> !mt.tensor<[experts=4], i64> {
    %n = mt.expert_load %i k topk to experts : <[batch=4, seq=2, topk=2], i32> -> <[experts=4], i64>
    return %n : !mt.tensor<[experts=4], i64>
  }
}

// -----

// Tests ring attention's backward with causal grouped-query attention under cp 2 (the
// two_chunk split): the forward's steps again by chunk pairs (key and value shifted once,
// positions not), the log-sum-exp and output stacked back into the sequence; the gradient
// of this rank's own block whole under the mask; then, with the key and value blocks
// shifted once more, the two chunk pairs without a mask: (second query chunk, first key
// chunk) and the pair the weight chooses, each giving dq, dk and dv by chunks; the key and
// value gradients' chunks are stacked into a block to travel (shifted before the step's
// contribution is added, and once more home), the query gradient's chunks stacked into
// the sequence.
// CHECK-LABEL: func.func @forward
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[seq_kv=4], f32>, <[seq=4], f32>
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: %[[W:.*]] = mt.greater %{{.*}}, %{{.*}} : <[], f32>, <[], f32> -> <[], f32>
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, kv_heads=1, heads_group=2], f32>
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, kv_heads=1, heads_group=2, head_dim=4], f32>
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[seq_kv=4], f32>, <[seq=4], f32>
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[], f32>, <[], f32> -> <[], f32>
// CHECK-NOT: <[seq_kv=4], f32>, <[seq=4], f32>
// CHECK: mt.contract {{.*}} over [seq_half, heads_group] : <[seq_half=2, kv_heads=1, heads_group=2, seq_kv_half=2], f32>, {{.*}} -> <[kv_heads=1, seq_kv_half=2, head_dim=4], f32>
// CHECK: mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_kv_half] into seq_kv : <[kv_heads=1, seq_chunk=2, seq_kv_half=2, head_dim=4], f32> -> <[kv_heads=1, seq_kv=4, head_dim=4], f32>
// CHECK: mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_kv_half] into seq_kv
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, kv_heads=1, heads_group=2, head_dim=4], f32> -> <[seq=4, kv_heads=1, heads_group=2, head_dim=4], f32>
// CHECK-COUNT-2: mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK-NOT: mtp.shift
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>,
                     %k: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %v: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>,
                     %do: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>) -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>
    %lq = mt.reduce_sum %dq over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    %lk = mt.reduce_sum %dk over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    %lv = mt.reduce_sum %dv over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    return %lq, %lk, %lv : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
}

// -----

// Tests that ring attention saving its log-sum-exp (save_lse) computes it in the same ring
// (one shift each of key and value under cp 2): m + log l of each query chunk, stacked
// back into the sequence like the output and laid out like the query's rows.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, heads=2, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: mtp.shift
// CHECK: mt.log
// CHECK: mt.log
// CHECK: %[[LSE:.*]] = mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, heads=2], f32> -> <[seq=4, heads=2], f32>
// CHECK: mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, heads=2, head_dim=4], f32> -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NOT: mtp.shift
// CHECK: mt.reduce_sum %[[LSE]] over [seq, heads]
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, %v: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>) -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>) {
    %o, %lse = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) causal scale 0.5 save_lse : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32>
    %l = mt.reduce_sum %o over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    %m = mt.reduce_sum %lse over [seq, heads] : <[seq=8, heads=2], f32> -> <[], f32>
    return %l, %m : !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
}

// -----

// Tests ring attention's backward under cp 2 with the forward's output and log-sum-exp
// saved (grouped-query, causal): no forward steps again, so the key and value blocks shift
// once each (for the gradient step of the other rank's block) where the recomputing
// backward shifts them twice; the key and value gradient blocks shift twice each (with
// their blocks, then home), and the saved values are only split into the grouped heads.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: mt.log
// CHECK: mt.split %{{.*}} heads into [kv_heads, heads_group] : <[seq=4, heads=2], f32> -> <[seq=4, kv_heads=1, heads_group=2], f32>
// CHECK-NOT: mt.log
// CHECK: mt.greater %{{.*}}, %{{.*}} : <[seq_kv=4], f32>, <[seq=4], f32>
// CHECK-COUNT-2: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-COUNT-4: mtp.shift {{.*}} over "cp" offset 1 rotate
// CHECK-NOT: mtp.shift
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, %v: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, %do: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, %o: !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, %lse: !mt.tensor<[seq=8, heads=2], f32>) -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do saved(%o, %lse : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2], f32>) dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=8, heads=2, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], f32>
    %lq = mt.reduce_sum %dq over [seq, heads, head_dim] : <[seq=8, heads=2, head_dim=4], f32> -> <[], f32>
    %lk = mt.reduce_sum %dk over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    %lv = mt.reduce_sum %dv over [seq, kv_heads, head_dim] : <[seq=8, kv_heads=1, head_dim=4], f32> -> <[], f32>
    return %lq, %lk, %lv : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
}

// -----

// Tests that ring attention under mixed precision computes its block steps in f32, as
// mt-decompose computes attention: this rank's bf16 query, key and value blocks are cast
// to f32 once, every step (online softmax, log-sum-exp, rescaling) is in f32, and the
// output and log-sum-exp are cast down to bf16 once each at the end. The key and value
// blocks travel in bf16 (the values they hold, exactly) and are cast up on arrival.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], bf16>
// CHECK: %[[K:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], bf16>
// CHECK: %[[V:.*]] = mtp.to_local {{.*}} -> <[seq=4, heads=2, head_dim=4], bf16>
// CHECK: mt.cast %[[Q]] : <[seq=4, heads=2, head_dim=4], bf16> to <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NEXT: mt.cast %[[K]] : <[seq=4, heads=2, head_dim=4], bf16> to <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NEXT: mt.cast %[[V]] : <[seq=4, heads=2, head_dim=4], bf16> to <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NOT: bf16
// CHECK: mtp.from_local %[[K]]
// CHECK-NEXT: mtp.shift {{.*}} : <[seq=8, heads=2, head_dim=4], bf16, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NEXT: %[[K1:.*]] = mtp.to_local
// CHECK-NEXT: mt.cast %[[K1]] : <[seq=4, heads=2, head_dim=4], bf16> to <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NEXT: mtp.from_local %[[V]]
// CHECK-NEXT: mtp.shift {{.*}} : <[seq=8, heads=2, head_dim=4], bf16, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NEXT: %[[V1:.*]] = mtp.to_local
// CHECK-NEXT: mt.cast %[[V1]] : <[seq=4, heads=2, head_dim=4], bf16> to <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NOT: bf16
// CHECK: %[[LSE:.*]] = mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, heads=2], f32> -> <[seq=4, heads=2], f32>
// CHECK-NOT: bf16
// CHECK: %[[OUT:.*]] = mt.merge %{{.*}} [seq_chunk, seq_half] into seq : <[seq_chunk=2, seq_half=2, heads=2, head_dim=4], f32> -> <[seq=4, heads=2, head_dim=4], f32>
// CHECK-NOT: bf16
// CHECK: mt.cast %[[OUT]] : <[seq=4, heads=2, head_dim=4], f32> to <[seq=4, heads=2, head_dim=4], bf16>
// CHECK-NEXT: mt.cast %[[LSE]] : <[seq=4, heads=2], f32> to <[seq=4, heads=2], bf16>
// CHECK-NOT: mt.cast
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, %k: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, %v: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>) -> (!mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2], bf16>) {
    %o, %lse = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) causal scale 0.5 save_lse : !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>
    return %o, %lse : !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2], bf16>
  }
}

// -----

// Tests ring attention's backward under mixed precision (grouped-query, causal, the
// forward's statistics saved): every operand is cast to f32 once; the key and value blocks
// travel in bf16 and are cast up on arrival, while the key and value gradient blocks,
// accumulated over the steps, travel in f32; the three gradients are cast down once.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-6: mt.cast %{{.*}} : <{{.*}}, bf16> to <{{.*}}, f32>
// CHECK-NOT: bf16
// CHECK: mtp.from_local
// CHECK-NEXT: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], bf16, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: mt.cast %{{.*}} : <[seq=4, kv_heads=1, head_dim=4], bf16> to <[seq=4, kv_heads=1, head_dim=4], f32>
// CHECK-NEXT: mtp.from_local
// CHECK-NEXT: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], bf16, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: mt.cast %{{.*}} : <[seq=4, kv_heads=1, head_dim=4], bf16> to <[seq=4, kv_heads=1, head_dim=4], f32>
// CHECK-NOT: bf16
// CHECK-COUNT-4: mtp.shift {{.*}} : <[seq=8, kv_heads=1, head_dim=4], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>
// CHECK-NOT: bf16
// CHECK: mt.cast %{{.*}} : <[seq=4, heads=2, head_dim=4], f32> to <[seq=4, heads=2, head_dim=4], bf16>
// CHECK-NEXT: mt.cast %{{.*}} : <[seq=4, kv_heads=1, head_dim=4], f32> to <[seq=4, kv_heads=1, head_dim=4], bf16>
// CHECK-NEXT: mt.cast %{{.*}} : <[seq=4, kv_heads=1, head_dim=4], f32> to <[seq=4, kv_heads=1, head_dim=4], bf16>
// CHECK-NOT: mt.cast
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%q: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, %k: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, %v: !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, %do: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, %o: !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, %lse: !mt.tensor<[seq=8, heads=2], bf16>) -> (!mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do saved(%o, %lse : !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2], bf16>) dims(seq, heads, kv_heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, !mt.tensor<[seq=8, heads=2, head_dim=4], bf16> -> !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>
    return %dq, %dk, %dv : !mt.tensor<[seq=8, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>, !mt.tensor<[seq=8, kv_heads=1, head_dim=4], bf16>
  }
}

// -----

// Tests parallel folding (etp = 1 under tp 2, ep 2, sp): an expert weight is split over
// [ep, tp] along experts (one whole expert of 4 per rank, ffn whole), a dense weight keeps
// its ffn split over tp. Each ep rank routes its part of the batch (the sequence gathered
// over tp, as without folding); the slots move to the experts' ep ranks by the all_to_all
// over ep and each tp rank takes its own experts from them (an all_slice, no
// communication), so no expert is computed twice; the expert outputs are all-gathered over
// tp and return by the all_to_all over ep to the ranks that combine them.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: !mt.tensor<[ffn=2, hidden=4], f32> {mt.param = @wb}
// CHECK-SAME: %arg2: !mt.tensor<[experts=1, hidden=4, ffn=4], f32> {mt.param = @w1}
// CHECK: mt.dispatch {{.*}} -> <[experts=4, capacity=4, hidden=4], f32>
// CHECK-NEXT: mtp.from_local
// CHECK-NEXT: mtp.all_to_all {{.*}} over "ep" from "capacity" to "experts"
// CHECK-NEXT: mtp.all_slice {{.*}} over "tp" along "experts" : {{.*}} split {experts = [ep]}> -> {{.*}} split {experts = [ep, tp]}>
// CHECK-NEXT: %[[S:.*]] = mtp.to_local
// CHECK-NEXT: %[[E:.*]] = mt.contract %[[S]], %arg2 over [hidden] : <[experts=1, capacity=8, hidden=4], f32>, <[experts=1, hidden=4, ffn=4], f32> -> <[experts=1, capacity=8, ffn=4], f32>
// CHECK-NEXT: mtp.from_local %[[E]] : <[experts=1, capacity=8, ffn=4], f32> -> <[experts=4, capacity=8, ffn=4], f32, <[ep = 2, tp = 2]>, split {experts = [ep, tp]}>
// CHECK-NEXT: mtp.all_gather {{.*}} over "tp" along "experts"
// CHECK-NEXT: mtp.all_to_all {{.*}} over "ep" from "experts" to "capacity"
// CHECK-NEXT: mtp.to_local
// CHECK-NEXT: mt.combine {{.*}} : <[experts=4, capacity=4, ffn=4], f32>, <[batch=2, seq=4, topk=2], i32>, <[batch=2, seq=4, topk=2], f32> -> <[batch=2, seq=4, ffn=4], f32>
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, ep = 2, etp = 1, sp = true>} {
  mt.param @wb : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @w1 : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @router : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  func.func @forward(%x: !mt.tensor<[batch=4, seq=4, ffn=4], f32>,
                     %wb: !mt.tensor<[ffn=4, hidden=4], f32> {mt.param = @wb},
                     %w1: !mt.tensor<[experts=4, hidden=4, ffn=4], f32> {mt.param = @w1},
                     %router: !mt.tensor<[hidden=4, experts=4], f32> {mt.param = @router}) -> !mt.tensor<[], f32> {
    %h = mt.contract %x, %wb over [ffn] : <[batch=4, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=4, seq=4, hidden=4], f32>
    %logits = mt.contract %h, %router over [hidden] : <[batch=4, seq=4, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=4, seq=4, experts=4], f32>
    %v, %i = mt.topk %logits over experts k topk : <[batch=4, seq=4, experts=4], f32> -> <[batch=4, seq=4, topk=2], f32>, <[batch=4, seq=4, topk=2], i32>
    %d = mt.dispatch %h, %i k topk to experts capacity capacity factor 1.000000e+00 : <[batch=4, seq=4, hidden=4], f32>, <[batch=4, seq=4, topk=2], i32> -> <[experts=4, capacity=8, hidden=4], f32>
    %y = mt.contract %d, %w1 over [hidden] : <[experts=4, capacity=8, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=8, ffn=4], f32>
    %c = mt.combine %y, %i, %v k topk from experts capacity capacity : <[experts=4, capacity=8, ffn=4], f32>, <[batch=4, seq=4, topk=2], i32>, <[batch=4, seq=4, topk=2], f32> -> <[batch=4, seq=4, ffn=4], f32>
    %s = mt.reduce_sum %c over [batch, seq, ffn] : <[batch=4, seq=4, ffn=4], f32> -> <[], f32>
    return %s : !mt.tensor<[], f32>
  }
}

// -----

// Tests that under ring attention a sequence that does not divide into 2 cp chunks is an
// error naming the argument and the chunks (the mesh's cp is two_chunk).
module attributes {mt.outlined, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  // expected-error @+1 {{2 x cp = 4 does not divide seq = 6 of argument #0 of @forward (ring attention's load balancing cuts it in 2 chunks per cp rank)}}
  func.func @forward(%x: !mt.tensor<[seq=6, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %l = mt.reduce_sum %x over [seq, hidden] : <[seq=6, hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a fold whose ep x tp does not divide the experts is refused.
// expected-error @+1 {{etp 1 folds tp into expert parallelism: the 2 experts cannot be split over ep x tp = 2 x 2 ranks; choose ep and tp whose product divides them, or --etp 2 (the expert weights split over tp like the dense ones)}}
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2, ep = 2, etp = 1>} {
  mt.param @we : !mt.tensor<[experts=2, hidden=4, ffn=8], f32> init normal(2.000000e-02)
}

// -----

// Tests that mt-kv-cache's caches stay on their rank under tp: prefill returns its keys in
// the layout it computes them in (this rank's heads), decode_step takes and returns them in
// that layout, and neither gathers them.
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %{{.*}}: !mt.tensor<[seq=4, hidden=4], f32> {mt.buffer = "tokens"}, %{{.*}}: !mt.tensor<[hidden=4, heads=1, head_dim=2], f32> {mt.param = @wk}) -> (!mt.tensor<[seq_cache=4, heads=1, head_dim=2], f32> {mt.buffer = "keys"})
// CHECK-NOT: mtp.
// CHECK: return
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME: %{{.*}}: !mt.tensor<[seq_cache=4, heads=1, head_dim=2], f32> {mt.buffer = "keys"}, %{{.*}}: !mt.tensor<[hidden=4, heads=1, head_dim=2], f32> {mt.param = @wk}) -> (!mt.tensor<[seq_cache=4, heads=1, head_dim=2], f32> {mt.buffer = "keys"})
// CHECK-NOT: mtp.
// CHECK: return
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wk : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @prefill(%x: !mt.tensor<[seq=4, hidden=4], f32> {mt.buffer = "tokens"},
                     %wk: !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> {mt.param = @wk}) -> (!mt.tensor<[seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}) {
    %k = mt.contract %x, %wk over [hidden] : <[seq=4, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[seq=4, heads=2, head_dim=2], f32>
    %c = mt.rename %k seq to seq_cache : <[seq=4, heads=2, head_dim=2], f32> -> <[seq_cache=4, heads=2, head_dim=2], f32>
    return %c : !mt.tensor<[seq_cache=4, heads=2, head_dim=2], f32>
  }
  func.func @decode_step(%x: !mt.tensor<[seq=1, hidden=4], f32> {mt.buffer = "tokens"},
                         %keys: !mt.tensor<[seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"},
                         %wk: !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> {mt.param = @wk}) -> (!mt.tensor<[seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}) {
    %k = mt.contract %x, %wk over [hidden] : <[seq=1, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[seq=1, heads=2, head_dim=2], f32>
    %s = mt.reduce_sum %k over [seq] : <[seq=1, heads=2, head_dim=2], f32> -> <[heads=2, head_dim=2], f32>
    %n = mt.add %keys, %s : <[seq_cache=4, heads=2, head_dim=2], f32>, <[heads=2, head_dim=2], f32> -> <[seq_cache=4, heads=2, head_dim=2], f32>
    return %n : !mt.tensor<[seq_cache=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that a decode_step without a prefill to give its cache's layout is an error.
module attributes {mt.outlined, mt.parallel = #mt.parallel<tp = 2>} {
  mt.param @wk : !mt.tensor<[hidden=4, heads=2], f32> init normal(2.000000e-02)
  // expected-error @+1 {{takes the keys cache, which no prefill returns}}
  func.func @decode_step(%x: !mt.tensor<[seq=1, heads=2], f32> {mt.buffer = "tokens"},
                         %keys: !mt.tensor<[seq_cache=4, heads=2], f32> {mt.buffer = "keys"}) -> (!mt.tensor<[seq_cache=4, heads=2], f32> {mt.buffer = "keys"}) {
    return %keys : !mt.tensor<[seq_cache=4, heads=2], f32>
  }
}

// RUN: mt-opt %s -split-input-file -verify-diagnostics -mt-reset-documents | FileCheck %s

// Tests that reset_position_ids gives forward a last argument, the i32 position ids with the
// tokens' dims named position_ids, and that the position table (the parameter over
// attention's sequence dimension) is read at them: its rows renamed seq_position (positions,
// not the tokens' sequence, which partitioning splits), then a gather, which the add reads in
// place of the broadcast table.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[T:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>, %[[L:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: %[[WPE:.*]] = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
// CHECK: %[[TABLE:.*]] = mt.rename %[[WPE]] seq to seq_position : <[seq=4, hidden=4], f32> -> <[seq_position=4, hidden=4], f32>
// CHECK: %[[ROWS:.*]] = mt.gather %[[TABLE]], %[[P]] over seq_position : <[seq_position=4, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
// CHECK: %[[X:.*]] = mt.gather %{{.*}}, %[[T]] over vocab
// CHECK: mt.add %[[X]], %[[ROWS]] : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
// CHECK-NOT: mt.param_ref @wpe
module attributes {mt.reset_position_ids} {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.wq layer @block : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %wq = mt.param_ref @block.wq : <[hidden=4, heads=2, head_dim=2], f32>
    %q = mt.contract %x, %wq over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %labels: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %y = mt.add %x, %p : <[batch=2, seq=4, hidden=4], f32>, <[seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %l = mt.contract %y, %w over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=4, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=4, vocab=5], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the position ids come after the loss mask of mt-loss-mask.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: mt.gather %{{.*}}, %[[P]] over seq_position
module attributes {mt.reset_position_ids} {
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %labels: !mt.tensor<[batch=2, seq=4], i32>, %mask: !mt.tensor<[batch=2, seq=4], f32>) -> !mt.tensor<[], f32> {
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    %t = mt.cast %tokens : <[batch=2, seq=4], i32> to <[batch=2, seq=4], f32>
    %y = mt.add %t, %p : <[batch=2, seq=4], f32>, <[seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %loss = mt.reduce_sum %y over [batch, seq, hidden] : <[batch=2, seq=4, hidden=4], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that without the attribute the module is left alone.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[seq=4, hidden=4], f32>
// CHECK-NEXT: mt.param_ref @wpe
// CHECK-NEXT: return
module {
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[seq=4, hidden=4], f32> {
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    return %p : !mt.tensor<[seq=4, hidden=4], f32>
  }
}

// -----

// Tests that pipeline parallelism reads the table at the position ids as one stage does
// (mt-pipeline-chunks gives them to the chunk reading the table).
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: mt.gather %{{.*}}, %[[P]] over seq_position
module attributes {mt.reset_position_ids, mt.parallel = #mt.parallel<pp = 2>} {
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %labels: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    %t = mt.cast %tokens : <[batch=2, seq=4], i32> to <[batch=2, seq=4], f32>
    %y = mt.add %t, %p : <[batch=2, seq=4], f32>, <[seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %loss = mt.reduce_sum %y over [batch, seq, hidden] : <[batch=2, seq=4, hidden=4], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that reset_attention_mask alone (the model reads no positions) gives forward the
// position ids and masks every attention to the documents at them: in a layer through
// mt.repeat's invariant operand, in the entry directly.
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[LP:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.attention %[[X]], %[[X]], %[[X]] positions %[[LP]] dims(seq, heads, heads, head_dim) causal
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>, %[[FX:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: %[[A:.*]] = mt.attention %[[FX]], %[[FX]], %[[FX]] positions %[[P]] dims
// CHECK: mt.repeat @block(%[[A]], %[[P]]) count 2 {carried = 1 : i64, invariant = 1 : i64}
module attributes {mt.reset_attention_mask} {
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %y = mt.repeat @block(%a) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %y : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that with both settings rope and attention in a layer read the one position ids
// argument, passed once.
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[LP:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: %[[R:.*]] = mt.rope %[[X]] over head_dim position seq at %[[LP]]
// CHECK: mt.attention %[[R]], %[[R]], %[[R]] positions %[[LP]] dims
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[FX:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: mt.repeat @block(%[[FX]], %[[P]]) count 2 {carried = 1 : i64, invariant = 1 : i64}
module attributes {mt.reset_position_ids, mt.reset_attention_mask} {
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %r, %r, %r dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %y = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %y : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that under ring attention (cp_comm_type p2p, whose block steps take the document
// positions: mtp-partition) attention is masked to the documents as without it.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>, %[[FX:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: mt.attention %[[FX]], %[[FX]], %[[FX]] positions %[[P]] dims
module attributes {mt.reset_attention_mask, mt.parallel = #mt.parallel<cp = 2, cp_comm_type = p2p>} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that with fused attention (whose block loops take the document positions:
// mt-to-linalg) attention is masked to the documents as without it.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>, %[[FX:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: mt.attention %[[FX]], %[[FX]], %[[FX]] positions %[[P]] dims
module attributes {mt.reset_attention_mask, mt.fused_attention = 64 : i64} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that attention that is not causal is refused: the document mask is causal's.
module attributes {mt.reset_attention_mask} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> {
    // expected-error @below {{reset_attention_mask masks causal attention to the documents; this attention is not causal}}
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, hidden) scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
}

// -----

// Tests that attention in a function that is not a layer is refused.
module attributes {mt.reset_attention_mask} {
  func.func @helper(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    // expected-error @below {{reset_attention_mask reaches attention over 'seq' in the entry and in layers (mt.layer), not in 'helper'; compile without it}}
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>) {
    return
  }
}

// -----

// Tests that attention whose query lacks the tokens' dimensions (the batch) is refused.
module attributes {mt.reset_attention_mask} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=2], f32> {
    // expected-error @below {{reset_attention_mask: attention's query [seq=4, heads=2, head_dim=2] lacks the dimensions of the tokens [batch=2, seq=4], so the documents cannot be read per query}}
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[seq=4, heads=2, head_dim=2], f32>, <[seq=4, heads=2, head_dim=2], f32>, <[seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that a model without attention (no sequence dimension to read positions over) is
// refused.
module attributes {mt.reset_position_ids} {
  // expected-error @below {{reset_position_ids needs an attention (mt.attention): its sequence dimension holds the positions}}
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>) {
    return
  }
}

// -----

// Tests that rope over the sequence in a layer rotates at the position ids: the layer takes
// them as a last argument, which its mt.repeat passes unchanged to every call (an
// invariant operand after the carried one); rope in the entry reads the argument itself.
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[X:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[LP:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK: mt.rope %[[X]] over head_dim position seq at %[[LP]] : !mt.tensor<[batch=2, seq=4], i32> : <[batch=2, seq=4, heads=2, head_dim=2], f32>
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>, %[[FX:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>, %[[P:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"})
// CHECK: %[[R:.*]] = mt.rope %[[FX]] over head_dim position seq at %[[P]] : !mt.tensor<[batch=2, seq=4], i32>
// CHECK: mt.repeat @block(%[[R]], %[[P]]) count 2 {carried = 1 : i64, invariant = 1 : i64}
module attributes {mt.reset_position_ids} {
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %r, %r, %r dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %y = mt.repeat @block(%r) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %y : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that rope over the sequence in a function that is not a layer is refused.
module attributes {mt.reset_position_ids} {
  func.func @helper(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    // expected-error @below {{reset_position_ids reaches rope over 'seq' in the entry and in layers (mt.layer), not in 'helper'; compile without it}}
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %r : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that a layer with rope called other than by mt.repeat is refused.
module attributes {mt.reset_position_ids} {
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %r, %r, %r dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> {
    // expected-error @below {{reset_position_ids reaches layers applied by mt.repeat, not 'block' called here; compile without it}}
    %y = func.call @block(%x) : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %y : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that rope whose operand lacks the tokens' dimensions (the batch) is refused.
module attributes {mt.reset_position_ids} {
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=2], f32> {
    // expected-error @below {{reset_position_ids: rope's operand [seq=4, heads=2, head_dim=2] lacks the dimensions of the tokens [batch=2, seq=4], so the position ids cannot be read per element}}
    %r = mt.rope %x over head_dim position seq : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %r, %r, %r dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[seq=4, heads=2, head_dim=2], f32>, <[seq=4, heads=2, head_dim=2], f32>, <[seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[seq=4, heads=2, head_dim=2], f32>
  }
}

// -----

// Tests that a position table read in a layer is refused.
module attributes {mt.reset_position_ids} {
  mt.param @wpe : !mt.tensor<[seq=4, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    // expected-error @below {{reset_position_ids does not reach the position table @wpe read in 'block' yet (a table read in a layer); compile without it}}
    %p = mt.param_ref @wpe : <[seq=4, head_dim=2], f32>
    %y = mt.add %x, %p : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[seq=4, head_dim=2], f32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %y, %y, %y dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>) {
    return
  }
}

// -----

// Tests that a model reading no positions is refused: the setting would do nothing.
module attributes {mt.reset_position_ids} {
  // expected-error @below {{reset_position_ids: the model reads no positions (no parameter with the sequence dimension 'seq' and no rope over it), so the setting would do nothing}}
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
}

// -----

// Tests that a position table read where the batch is not a dimension of the result (a
// reader that would change type) is refused.
module attributes {mt.reset_position_ids} {
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[], f32> {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    // expected-error @below {{reset_position_ids reads the position table @wpe at the position ids, but this reader's result lacks the tokens' dimensions}}
    %s = mt.reduce_sum %p over [seq, hidden] : <[seq=4, hidden=4], f32> -> <[], f32>
    return %s : !mt.tensor<[], f32>
  }
}

// RUN: mt-opt %s -split-input-file -mt-logits | FileCheck %s

// Tests that @logits is @forward without the labels, returning the operand of the loss
// (tokens' dims, then the class dimension) as the `logits` buffer, placed after @forward,
// which stays as it was.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> !mt.tensor<[], f32>
// CHECK: mt.cross_entropy
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %[[T:.*]]: !mt.tensor<[batch=2, seq=3], i32>)
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK: %[[W:.*]] = mt.param_ref @wte
// CHECK: %[[X:.*]] = mt.gather %[[W]], %[[T]] over vocab
// CHECK: %[[D:.*]] = mt.dropout %[[X]]
// CHECK: %[[L:.*]] = mt.contract %[[D]], %[[W]] over [hidden]
// CHECK-NOT: mt.cross_entropy
// CHECK: return %[[L]] : !mt.tensor<[batch=2, seq=3, vocab=5], f32>
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %d = mt.dropout %x rate 1.000000e-01 stream 0 : <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %d, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that logits computed in another dimension order are transposed to the tokens'
// dims then the classes, and that what only the loss needed (an auxiliary loss) is erased.
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK: %[[L:.*]] = mt.contract {{.*}} -> <[vocab=5, batch=2, seq=3], f32>
// CHECK-NOT: mt.reduce_sum
// CHECK: %[[O:.*]] = mt.transpose %[[L]] : <[vocab=5, batch=2, seq=3], f32> to <[batch=2, seq=3, vocab=5], f32>
// CHECK-NOT: mt.reduce_sum
// CHECK: return %[[O]]
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %w, %x over [hidden] : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3, hidden=4], f32> -> <[vocab=5, batch=2, seq=3], f32>
    %ce = mt.cross_entropy %l, %labels over vocab : <[vocab=5, batch=2, seq=3], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    %aux = mt.reduce_sum %x over [batch, seq, hidden] : <[batch=2, seq=3, hidden=4], f32> -> <[], f32>
    %loss = mt.add %ce, %aux : <[], f32>, <[], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a loss with a mask (mt-loss-mask) is cut like the plain one: @logits takes
// neither the labels nor the mask.
// CHECK-LABEL: func.func @forward(
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} mask
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %[[T:[^:]*]]: !mt.tensor<[batch=2, seq=3], i32>)
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK-NOT: mt.cross_entropy
// CHECK: return
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>, %mask: !mt.tensor<[batch=2, seq=3], f32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %x, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels mask %mask over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32>, !mt.tensor<[batch=2, seq=3], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the position ids of mt-reset-documents leave @logits with the labels and the
// mask: the position table is read whole again (generation reads one document at the
// tokens' own positions), while @forward keeps its gather.
// CHECK-LABEL: func.func @forward(
// CHECK: mt.gather %{{.*}}, %{{.*}} over seq_position
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %[[T:[^:]*]]: !mt.tensor<[batch=2, seq=3], i32>)
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK: %[[P:.*]] = mt.param_ref @wpe
// CHECK-NOT: seq_position
// CHECK: mt.add %{{.*}}, %[[P]] : <[batch=2, seq=3, hidden=4], f32>, <[seq=3, hidden=4], f32>
// CHECK: return
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wpe : !mt.tensor<[seq=3, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>, %mask: !mt.tensor<[batch=2, seq=3], f32>, %positions: !mt.tensor<[batch=2, seq=3], i32> {mt.input = "position_ids"}) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %p = mt.param_ref @wpe : <[seq=3, hidden=4], f32>
    %table = mt.rename %p seq to seq_position : <[seq=3, hidden=4], f32> -> <[seq_position=3, hidden=4], f32>
    %rows = mt.gather %table, %positions over seq_position : <[seq_position=3, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %y = mt.add %x, %rows : <[batch=2, seq=3, hidden=4], f32>, <[batch=2, seq=3, hidden=4], f32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %y, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels mask %mask over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32>, !mt.tensor<[batch=2, seq=3], f32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that attention within documents in the entry (--reset-attention-mask) is plain
// causal attention in @logits, which takes no position ids (generation reads one
// document), while @forward keeps its positions.
// CHECK-LABEL: func.func @forward(
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} dims
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=3], i32>)
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK: mt.attention %[[X:[^,]*]], %[[X]], %[[X]] dims(seq, heads, heads, hidden) causal
// CHECK: return
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>, %positions: !mt.tensor<[batch=2, seq=3], i32> {mt.input = "position_ids"}) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %h = mt.broadcast %x : <[batch=2, seq=3, hidden=4], f32> to <[batch=2, seq=3, heads=1, hidden=4], f32>
    %a = mt.attention %h, %h, %h positions %positions dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=3, heads=1, hidden=4], f32>, <[batch=2, seq=3, heads=1, hidden=4], f32>, <[batch=2, seq=3, heads=1, hidden=4], f32>, !mt.tensor<[batch=2, seq=3], i32>
    %l = mt.contract %a, %w over [hidden] : <[batch=2, seq=3, heads=1, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, heads=1, vocab=5], f32>
    %m = mt.reduce_sum %l over [heads] : <[batch=2, seq=3, heads=1, vocab=5], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %m, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a forward without a cross-entropy (nothing to generate from) gets no @logits.
// CHECK-LABEL: func.func @forward(
// CHECK-NOT: func.func @logits
module {
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>, %y: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[], f32> {
    %d = mt.sub %x, %y : <[hidden=4], f32>, <[hidden=4], f32> -> <[hidden=4], f32>
    %l = mt.reduce_sum %d over [hidden] : <[hidden=4], f32> -> <[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a forward using its labels beyond the loss's labels gets no @logits: the
// function could not do without them.
// CHECK-LABEL: func.func @forward(
// CHECK-NOT: func.func @logits
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %labels over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], f32>
    %l = mt.contract %x, %w over [hidden] : <[batch=2, seq=3, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=3, vocab=5], f32>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], f32>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a module with a @logits function already is left alone.
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: -> !mt.tensor<[hidden=4], f32>
// CHECK-NOT: func.func @logits
module {
  func.func @logits(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    return %x : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, vocab=5], f32>, %labels: !mt.tensor<[batch=2], i32>) -> !mt.tensor<[], f32> {
    %loss = mt.cross_entropy %tokens, %labels over vocab : <[batch=2, vocab=5], f32>, <[batch=2], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the logits of a bf16 model are widened to f32 (what sampling and the loss read).
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=3, vocab=5], f32> {mt.buffer = "logits"})
// CHECK: %[[L:.*]] = mt.contract {{.*}} -> <[batch=2, seq=3, vocab=5], bf16>
// CHECK: %[[W:.*]] = mt.cast %[[L]] : <[batch=2, seq=3, vocab=5], bf16> to <[batch=2, seq=3, vocab=5], f32>
// CHECK: return %[[W]]
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=3], i32>, %labels: !mt.tensor<[batch=2, seq=3], i32>) -> !mt.tensor<[], f32> {
    %w32 = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %w = mt.cast %w32 : <[vocab=5, hidden=4], f32> to <[vocab=5, hidden=4], bf16>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], bf16>, <[batch=2, seq=3], i32> -> <[batch=2, seq=3, hidden=4], bf16>
    %l = mt.contract %x, %w over [hidden] : <[batch=2, seq=3, hidden=4], bf16>, <[vocab=5, hidden=4], bf16> -> <[batch=2, seq=3, vocab=5], bf16>
    %loss = mt.cross_entropy %l, %labels over vocab : <[batch=2, seq=3, vocab=5], bf16>, <[batch=2, seq=3], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that layers reading the position ids only as rope's positions and attention's
// document positions run in @logits as the plain layer (@block.generate: rope at the index,
// plain causal attention, no ids; what mt-kv-cache caches), while @forward keeps them.
// CHECK-LABEL: module @layers
// CHECK: func.func @block.generate(%[[X:[^:]*]]: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> attributes {mt.layer_of = @block}
// CHECK: %[[R:.*]] = mt.rope %[[X]] over hidden position seq : <
// CHECK: mt.attention %[[R]], %[[R]], %[[R]] dims(seq, heads, heads, hidden) causal
// CHECK-LABEL: func.func @forward(
// CHECK: mt.repeat @block(%{{[^,]*}}, %{{[^)]*}}) count 2 {carried = 1 : i64, invariant = 1 : i64}
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32>)
// CHECK-NOT: mt.iota
// CHECK: mt.repeat @block.generate(%{{[^)]*}}) count 2 {carried = 1 : i64} :
module @layers {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> attributes {mt.layer} {
    %r = mt.rope %x over hidden position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
    %a = mt.attention %r, %r, %r positions %ids dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, !mt.tensor<[batch=2, seq=4], i32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %labels: !mt.tensor<[batch=2, seq=4], i32>, %positions: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"}) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %h = mt.broadcast %x : <[batch=2, seq=4, hidden=4], f32> to <[batch=2, seq=4, heads=1, hidden=4], f32>
    %y = mt.repeat @block(%h, %positions) count 2 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
    %l = mt.contract %y, %w over [hidden] : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=4, heads=1, vocab=5], f32>
    %m = mt.reduce_sum %l over [heads] : <[batch=2, seq=4, heads=1, vocab=5], f32> -> <[batch=2, seq=4, vocab=5], f32>
    %loss = mt.cross_entropy %m, %labels over vocab : <[batch=2, seq=4, vocab=5], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// -----

// Tests that layers reading the position ids otherwise (here as values added to the
// activations) get the positions 0, 1, ... as their invariant operand in @logits.
// CHECK-LABEL: module @other_use
// CHECK-NOT: @block.generate
// CHECK-LABEL: func.func @logits(
// CHECK: %[[IOTA:.*]] = mt.iota dim seq : <[seq=4], i32>
// CHECK: %[[IDS:.*]] = mt.broadcast %[[IOTA]] : <[seq=4], i32> to <[batch=2, seq=4], i32>
// CHECK: mt.repeat @block(%{{[^,]*}}, %[[IDS]]) count 2 {carried = 1 : i64, invariant = 1 : i64}
module @other_use {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32> attributes {mt.layer} {
    %f = mt.cast %ids : <[batch=2, seq=4], i32> to <[batch=2, seq=4], f32>
    %b = mt.broadcast %f : <[batch=2, seq=4], f32> to <[batch=2, seq=4, heads=1, hidden=4], f32>
    %s = mt.add %x, %b : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32> -> <[batch=2, seq=4, heads=1, hidden=4], f32>
    %a = mt.attention %s, %s, %s dims(seq, heads, heads, hidden) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>, <[batch=2, seq=4, heads=1, hidden=4], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
  }
  func.func @forward(%tokens: !mt.tensor<[batch=2, seq=4], i32>, %labels: !mt.tensor<[batch=2, seq=4], i32>, %positions: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "position_ids"}) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %h = mt.broadcast %x : <[batch=2, seq=4, hidden=4], f32> to <[batch=2, seq=4, heads=1, hidden=4], f32>
    %y = mt.repeat @block(%h, %positions) count 2 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, heads=1, hidden=4], f32>
    %l = mt.contract %y, %w over [hidden] : <[batch=2, seq=4, heads=1, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=4, heads=1, vocab=5], f32>
    %m = mt.reduce_sum %l over [heads] : <[batch=2, seq=4, heads=1, vocab=5], f32> -> <[batch=2, seq=4, vocab=5], f32>
    %loss = mt.cross_entropy %m, %labels over vocab : <[batch=2, seq=4, vocab=5], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

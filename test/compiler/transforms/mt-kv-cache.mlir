// RUN: mt-opt %s -split-input-file -mt-kv-cache | FileCheck %s

// Tests that a GPT-style logits (a learned position table, multi-head attention) gets a
// prefill of one sequence returning every layer's keys and values, and a decode_step of one
// position that reads the position table at its row, writes the cache at the position and
// attends over it with the later positions masked.
// CHECK-LABEL: func.func @block.prefill(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=1, seq=4, hidden=4], f32>
// CHECK-SAME: attributes {mt.layer_of = @block}
// CHECK: %[[Q:.*]] = mt.contract
// CHECK: mt.attention %[[Q]], %[[Q]], %[[Q]]
// CHECK: %[[K:.*]] = mt.rename %[[Q]] seq to seq_cache : <[batch=1, seq=4, heads=2, head_dim=2], f32> -> <[batch=1, seq_cache=4, heads=2, head_dim=2], f32>
// CHECK: %[[V:.*]] = mt.rename %[[Q]] seq to seq_cache
// CHECK: return %{{.*}}, %[[K]], %[[V]]
// CHECK-LABEL: func.func @block.decode(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=1, seq=1, hidden=4], f32>, %[[P:.*]]: !mt.tensor<[seq=1], i32>, %[[KC:.*]]: !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>, %[[VC:.*]]: !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>)
// CHECK-NOT: mt.attention
// CHECK: mt.iota dim seq_cache : <[seq_cache=4], f32>
// CHECK: mt.cast %[[P]] : <[seq=1], i32> to <[seq=1], f32>
// CHECK: mt.greater
// CHECK: mt.softmax {{.*}} over seq_cache
// CHECK: return {{.*}} : !mt.tensor<[batch=1, seq=1, hidden=4], f32>, !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>
// CHECK-LABEL: func.func @logits(
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=1, seq=4], i32> {mt.buffer = "tokens"})
// CHECK-SAME: -> (!mt.tensor<[batch=1, seq=4, vocab=5], f32> {mt.buffer = "logits"}, !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}, !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "values"})
// CHECK: mt.repeat @block.prefill(%{{.*}}) count 2 {carried = 1 : i64}
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME: %[[T:.*]]: !mt.tensor<[batch=1, seq=1], i32> {mt.buffer = "tokens"}, %[[DP:.*]]: !mt.tensor<[seq=1], i32> {mt.buffer = "position"}, %[[DK:.*]]: !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}, %[[DV:.*]]: !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "values"})
// CHECK-SAME: -> (!mt.tensor<[batch=1, seq=1, vocab=5], f32> {mt.buffer = "logits"}, {{.*}} {mt.buffer = "keys"}, {{.*}} {mt.buffer = "values"})
// CHECK: %[[WPE:.*]] = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
// CHECK: %[[ROW:.*]] = mt.gather %[[WPE]], %[[DP]] over seq : <[seq=4, hidden=4], f32>, <[seq=1], i32> -> <[seq=1, hidden=4], f32>
// CHECK: mt.add %{{.*}}, %[[ROW]]
// CHECK: %[[PS:.*]] = mt.broadcast %[[DP]] : <[seq=1], i32> to <[layers=2, seq=1], i32>
// CHECK: mt.repeat @block.decode(%{{.*}}, %[[PS]], %[[DK]], %[[DV]]) count 2 {carried = 1 : i64}
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.wq layer @block : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  mt.param @block.wo layer @block : !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %wq = mt.param_ref @block.wq : <[hidden=4, heads=2, head_dim=2], f32>
    %wo = mt.param_ref @block.wo : <[heads=2, head_dim=2, hidden=4], f32>
    %q = mt.contract %x, %wq over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %a = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %o = mt.contract %a, %wo over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[heads=2, head_dim=2, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %o : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %p = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %y = mt.add %x, %p : <[batch=2, seq=4, hidden=4], f32>, <[seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %z = mt.repeat @block(%y) count 2 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %l = mt.contract %z, %w over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that with rope and grouped-query attention the cache holds the rotated keys per kv
// head, and that decode_step rotates by the absolute position (rope over the whole window
// along seq_cache, the position's row selected) and splits the query heads per kv head.
// CHECK-LABEL: func.func @block.prefill(
// CHECK: %[[K:.*]] = mt.rope %{{.*}} over head_dim position seq : <[batch=1, seq=4, kv_heads=1, head_dim=2], f32>
// CHECK: mt.attention %{{.*}}, %[[K]], %{{.*}} dims(seq, heads, kv_heads, head_dim) causal
// CHECK: mt.rename %[[K]] seq to seq_cache
// CHECK-LABEL: func.func @block.decode(
// CHECK-NOT: mt.rope {{.*}} position seq :
// CHECK: mt.rope %{{.*}} over head_dim position seq_cache : <[batch=1, heads=2, head_dim=2, seq_cache=4], f32>
// CHECK: mt.rope %{{.*}} over head_dim position seq_cache : <[batch=1, kv_heads=1, head_dim=2, seq_cache=4], f32>
// CHECK: mt.split %{{.*}} heads into [kv_heads, heads_group] : <[batch=1, seq=1, heads=2, head_dim=2], f32> -> <[batch=1, seq=1, kv_heads=1, heads_group=2, head_dim=2], f32>
// CHECK: mt.softmax
// CHECK: mt.merge %{{.*}} [kv_heads, heads_group] into heads
// CHECK-NOT: mt.attention
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME: !mt.tensor<[layers=2, batch=1, seq_cache=4, kv_heads=1, head_dim=2], f32> {mt.buffer = "keys"}
module {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.wq layer @block : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  mt.param @block.wk layer @block : !mt.tensor<[hidden=4, kv_heads=1, head_dim=2], f32> init normal(2.000000e-02)
  mt.param @block.wo layer @block : !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %wq = mt.param_ref @block.wq : <[hidden=4, heads=2, head_dim=2], f32>
    %wk = mt.param_ref @block.wk : <[hidden=4, kv_heads=1, head_dim=2], f32>
    %wo = mt.param_ref @block.wo : <[heads=2, head_dim=2, hidden=4], f32>
    %q0 = mt.contract %x, %wq over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %q = mt.rope %q0 over head_dim position seq : <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %k0 = mt.contract %x, %wk over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, kv_heads=1, head_dim=2], f32> -> <[batch=2, seq=4, kv_heads=1, head_dim=2], f32>
    %k = mt.rope %k0 over head_dim position seq : <[batch=2, seq=4, kv_heads=1, head_dim=2], f32>
    %a = mt.attention %q, %k, %k0 dims(seq, heads, kv_heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, kv_heads=1, head_dim=2], f32>, <[batch=2, seq=4, kv_heads=1, head_dim=2], f32>
    %o = mt.contract %a, %wo over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[heads=2, head_dim=2, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %o : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %l = mt.contract %z, %w over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=5, hidden=4], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a module over tensor parallelism alone (here tp 2 with sequence parallelism)
// gets the cached functions: mtp-partition lays them out over tp as it does logits.
// CHECK-LABEL: func.func @logits(
// CHECK-LABEL: func.func @prefill(
// CHECK-LABEL: func.func @decode_step(
module attributes {mt.parallel = #mt.parallel<tp = 2, sp = true>} {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a module over data parallelism with the distributed optimizer (here beside tp 2)
// gets the cached functions: only the optimizer step is split over dp, every data-parallel
// rank scores the sequence whole.
// CHECK-LABEL: func.func @logits(
// CHECK-LABEL: func.func @prefill(
// CHECK-LABEL: func.func @decode_step(
module attributes {mt.parallel = #mt.parallel<tp = 2, dp = 2, distributed_optimizer = true>} {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a module under ZeRO-3 gets no cached functions: it splits the micro-batch over
// dp, which one sequence does not fill, and generation takes the window path.
// CHECK-LABEL: func.func @logits(
// CHECK-NOT: func.func @prefill
// CHECK-NOT: func.func @decode_step
module attributes {mt.parallel = #mt.parallel<dp = 2, distributed_optimizer = true>, mtc.zero_stage = 3 : i64} {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a module over context parallelism gets no cached functions: ring attention would
// need the cache split by positions.
// CHECK-LABEL: func.func @logits(
// CHECK-NOT: func.func @prefill
// CHECK-NOT: func.func @decode_step
module attributes {mt.parallel = #mt.parallel<cp = 2>} {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a model whose attention is not causal gets no cached functions: a position's
// scores depend on the later ones, which a cache has not seen.
// CHECK-LABEL: func.func @logits(
// CHECK-NOT: func.func @prefill
// CHECK-NOT: func.func @decode_step
module {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that the same model with causal attention does get them (the two cases above differ
// from it in one thing each).
// CHECK-LABEL: func.func @block.decode(
// CHECK-LABEL: func.func @logits(
// CHECK-LABEL: func.func @prefill(
// CHECK-LABEL: func.func @decode_step(
module {
  mt.param @wte : !mt.tensor<[vocab=5, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32> attributes {mt.layer} {
    %a = mt.attention %x, %x, %x dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[batch=2, seq=4, heads=2, head_dim=2], f32>
    return %a : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w = mt.param_ref @wte : <[vocab=5, heads=2, head_dim=2], f32>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, heads=2, head_dim=2], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, heads=2, head_dim=2], f32>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=2], f32>
    %l = mt.contract %z, %w over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], f32>, <[vocab=5, heads=2, head_dim=2], f32> -> <[batch=2, seq=4, vocab=5], f32>
    return %l : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

// -----

// Tests that a mixed-precision module (train precision bf16) gets an f32 cache: prefill widens
// the bf16 keys and values it returns, decode_step compares the positions in f32 (the rope
// row's 0/1 selection then cast to bf16), writes the widened new keys and values, attends in
// f32 and rounds the attention's output to bf16 once.
// CHECK-LABEL: func.func @block.prefill(
// CHECK: %[[Q:.*]] = mt.rope %{{.*}} over head_dim position seq : <[batch=1, seq=4, heads=2, head_dim=2], bf16>
// CHECK: %[[K32:.*]] = mt.cast %[[Q]] : <[batch=1, seq=4, heads=2, head_dim=2], bf16> to <[batch=1, seq=4, heads=2, head_dim=2], f32>
// CHECK: %[[K:.*]] = mt.rename %[[K32]] seq to seq_cache : <[batch=1, seq=4, heads=2, head_dim=2], f32> -> <[batch=1, seq_cache=4, heads=2, head_dim=2], f32>
// CHECK: return %{{.*}}, %[[K]], %{{.*}} : !mt.tensor<[batch=1, seq=4, hidden=4], bf16>, !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>, !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>
// CHECK-LABEL: func.func @block.decode(
// CHECK-SAME: %{{.*}}: !mt.tensor<[batch=1, seq=1, hidden=4], bf16>, %[[P:.*]]: !mt.tensor<[seq=1], i32>, %[[KC:.*]]: !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>, %[[VC:.*]]: !mt.tensor<[batch=1, seq_cache=4, heads=2, head_dim=2], f32>)
// CHECK: %[[ROT:.*]] = mt.rope %{{.*}} over head_dim position seq_cache : <[batch=1, heads=2, head_dim=2, seq_cache=4], bf16>
// CHECK: %[[IOTA:.*]] = mt.iota dim seq_cache : <[seq_cache=4], f32>
// CHECK: mt.cast %[[P]] : <[seq=1], i32> to <[seq=1], f32>
// CHECK: %[[ISNEW:.*]] = mt.sub %{{.*}} : <[seq_cache=4, seq=1], f32>, <[seq=1, seq_cache=4], f32> -> <[seq_cache=4, seq=1], f32>
// CHECK: %[[SELECT:.*]] = mt.cast %[[ISNEW]] : <[seq_cache=4, seq=1], f32> to <[seq_cache=4, seq=1], bf16>
// CHECK: mt.mul %[[ROT]], %[[SELECT]]
// CHECK: %[[NEWK:.*]] = mt.cast %{{.*}} : <[batch=1, seq=1, heads=2, head_dim=2], bf16> to <[batch=1, seq=1, heads=2, head_dim=2], f32>
// CHECK: mt.mul %[[NEWK]], %{{.*}} : <[batch=1, seq=1, heads=2, head_dim=2], f32>, <[seq_cache=4, seq=1], f32>
// CHECK: mt.mul %[[KC]], %{{.*}} : <[batch=1, seq_cache=4, heads=2, head_dim=2], f32>, <[seq_cache=4], f32>
// CHECK: mt.contract %{{.*}}, %{{.*}} over [head_dim] : <[batch=1, seq=1, heads=2, head_dim=2], f32>, <[batch=1, seq_cache=4, heads=2, head_dim=2], f32> -> <[batch=1, seq=1, heads=2, seq_cache=4], f32>
// CHECK: mt.constant -1.7014117331926443E+38 : <[], f32>
// CHECK: %[[PROBS:.*]] = mt.softmax %{{.*}} over seq_cache : <[batch=1, seq=1, heads=2, seq_cache=4], f32>
// CHECK: %[[OUT:.*]] = mt.contract %[[PROBS]], %{{.*}} over [seq_cache] : {{.*}} -> <[batch=1, seq=1, heads=2, head_dim=2], f32>
// CHECK: %[[ROUNDED:.*]] = mt.cast %[[OUT]] : <[batch=1, seq=1, heads=2, head_dim=2], f32> to <[batch=1, seq=1, heads=2, head_dim=2], bf16>
// CHECK: mt.contract %[[ROUNDED]], %{{.*}} over [heads, head_dim] : <[batch=1, seq=1, heads=2, head_dim=2], bf16>
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: -> (!mt.tensor<[batch=1, seq=4, vocab=5], f32> {mt.buffer = "logits"}, !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}, !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "values"})
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME: !mt.tensor<[layers=2, batch=1, seq_cache=4, heads=2, head_dim=2], f32> {mt.buffer = "keys"}
module @mixed attributes {mt.train = #mt.train<precision = bf16>} {
  mt.param @wte : !mt.tensor<[vocab=5, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.wq layer @block : !mt.tensor<[hidden=4, heads=2, head_dim=2], f32> init normal(2.000000e-02)
  mt.param @block.wo layer @block : !mt.tensor<[heads=2, head_dim=2, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%x: !mt.tensor<[batch=2, seq=4, hidden=4], bf16>) -> !mt.tensor<[batch=2, seq=4, hidden=4], bf16> attributes {mt.layer} {
    %wq32 = mt.param_ref @block.wq : <[hidden=4, heads=2, head_dim=2], f32>
    %wq = mt.cast %wq32 : <[hidden=4, heads=2, head_dim=2], f32> to <[hidden=4, heads=2, head_dim=2], bf16>
    %wo32 = mt.param_ref @block.wo : <[heads=2, head_dim=2, hidden=4], f32>
    %wo = mt.cast %wo32 : <[heads=2, head_dim=2, hidden=4], f32> to <[heads=2, head_dim=2, hidden=4], bf16>
    %q0 = mt.contract %x, %wq over [hidden] : <[batch=2, seq=4, hidden=4], bf16>, <[hidden=4, heads=2, head_dim=2], bf16> -> <[batch=2, seq=4, heads=2, head_dim=2], bf16>
    %q = mt.rope %q0 over head_dim position seq : <[batch=2, seq=4, heads=2, head_dim=2], bf16>
    %a = mt.attention %q, %q, %q0 dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=2, head_dim=2], bf16>, <[batch=2, seq=4, heads=2, head_dim=2], bf16>, <[batch=2, seq=4, heads=2, head_dim=2], bf16>
    %o = mt.contract %a, %wo over [heads, head_dim] : <[batch=2, seq=4, heads=2, head_dim=2], bf16>, <[heads=2, head_dim=2, hidden=4], bf16> -> <[batch=2, seq=4, hidden=4], bf16>
    return %o : !mt.tensor<[batch=2, seq=4, hidden=4], bf16>
  }
  func.func @logits(%tokens: !mt.tensor<[batch=2, seq=4], i32>) -> (!mt.tensor<[batch=2, seq=4, vocab=5], f32> {mt.buffer = "logits"}) {
    %w32 = mt.param_ref @wte : <[vocab=5, hidden=4], f32>
    %w = mt.cast %w32 : <[vocab=5, hidden=4], f32> to <[vocab=5, hidden=4], bf16>
    %x = mt.gather %w, %tokens over vocab : <[vocab=5, hidden=4], bf16>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], bf16>
    %z = mt.repeat @block(%x) count 2 : (!mt.tensor<[batch=2, seq=4, hidden=4], bf16>) -> !mt.tensor<[batch=2, seq=4, hidden=4], bf16>
    %l = mt.contract %z, %w over [hidden] : <[batch=2, seq=4, hidden=4], bf16>, <[vocab=5, hidden=4], bf16> -> <[batch=2, seq=4, vocab=5], bf16>
    %l32 = mt.cast %l : <[batch=2, seq=4, vocab=5], bf16> to <[batch=2, seq=4, vocab=5], f32>
    return %l32 : !mt.tensor<[batch=2, seq=4, vocab=5], f32>
  }
}

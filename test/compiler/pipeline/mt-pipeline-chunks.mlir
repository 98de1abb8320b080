// RUN: mt-opt %s -split-input-file -verify-diagnostics --mtc-training-pipeline --mt-decompose --mt-outline-parameters --mt-pipeline-chunks | FileCheck %s

// Tests that an even cut gives every chunk two layers, slices the layer parameters at
// their offsets, lists the tied embedding (read by chunk 0 and the head) as shared, and
// splits each backward into backward_input (B: the layers' input gradients, stashing what
// W reads) and backward_weight (W: the parameter gradients from the stash).
// CHECK-LABEL: module @even
// CHECK-SAME: mt.pipeline = {chunk_layers = array<i64: 2, 2>, chunk_stages = array<i64: 0, 1>, shared_params = {wte = array<i64: 0, 1>}, stages = 2 : i64, virtual_stages = 1 : i64}
// CHECK: func.func @chunk0.forward({{.*}}{mt.buffer = "input", mt.input = "tokens"}{{.*}}!mt.tensor<[layers=2, hidden=4, ffn=4], f32> {mt.param = @block.w1}
// CHECK-SAME: -> (!mt.tensor<[batch=2, seq=4, hidden=4], f32> {mt.buffer = "activation"}
// CHECK-SAME: mt.chunk_layers = array<i64: 0, 2>
// CHECK: mt.repeat @block.fwd{{.*}}count 2 {carried = 1 : i64, mt.first_instance = 0 : i64}
// CHECK: func.func @chunk0.backward({{.*}}{mt.buffer = "activation_grad"}
// CHECK-SAME: {mt.grad = @wte}
// CHECK-SAME: mt.grads = [@wte, @block.g, @block.w1, @block.w2]
// CHECK: func.func @chunk1.forward({{.*}}{mt.buffer = "activation"}{{.*}}{mt.buffer = "input", mt.input = "labels"}
// CHECK-SAME: -> (!mt.tensor<[], f32> {mt.buffer = "loss"}
// CHECK-SAME: mt.chunk_layers = array<i64: 2, 2>
// CHECK: mt.repeat @block.fwd{{.*}}count 2 {carried = 1 : i64, mt.first_instance = 2 : i64}
// CHECK: func.func @chunk1.backward(
// CHECK-SAME: mt.grads = [@wte, @lnf.g, @block.g, @block.w1, @block.w2]
// CHECK: func.func @chunk1.backward_input({{.*}}{mt.buffer = "residual", mt.index = 0 : i64}
// CHECK-SAME: {mt.buffer = "activation_grad"}, {{.*}}{mt.buffer = "stash", mt.index = 0 : i64}
// CHECK: mt.repeat @block.bwd.input({{.*}}) count 2 {carried = 1 : i64, mt.first_instance = 2 : i64, reverse}
// CHECK: func.func @chunk1.backward_weight(%{{.*}}{mt.buffer = "stash", mt.index = 0 : i64}
// CHECK-SAME: mt.grads = [@wte, @lnf.g, @block.g, @block.w1, @block.w2]
// CHECK: mt.repeat @block.bwd.weight({{.*}}) count 2 {carried = 0 : i64, mt.first_instance = 2 : i64, reverse}
module @even attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that each chunk takes the data inputs it reads, by the step's names: the loss mask
// (mt-loss-mask) where the loss is, with the labels, and the position ids
// (mt-reset-documents) where the position table is read, with the tokens: chunk 0's forward
// (the gather of the table's rows) and backward (their scatter-add).
// CHECK-LABEL: module @documents
// CHECK: func.func @chunk0.forward(
// CHECK-SAME: {mt.buffer = "input", mt.input = "position_ids"}
// CHECK-SAME: {mt.buffer = "input", mt.input = "tokens"}
// CHECK: mt.gather %{{.*}} over seq_position
// CHECK: func.func @chunk0.backward(
// CHECK-SAME: {mt.buffer = "input", mt.input = "tokens"}, %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], i32> {mt.buffer = "input", mt.input = "position_ids"}) ->
// CHECK: mt.embedding_grad %{{.*}} over seq_position
// CHECK: func.func @chunk1.forward(
// CHECK-SAME: {mt.buffer = "input", mt.input = "labels"}, %{{[^:]*}}: !mt.tensor<[batch=2, seq=4], f32> {mt.buffer = "input", mt.input = "loss_mask"}) ->
// CHECK-SAME: (!mt.tensor<[], f32> {mt.buffer = "loss"}
// CHECK: func.func @chunk1.backward(%{{[^:]*}}: !mt.tensor<[batch=2, seq=4], f32> {mt.buffer = "input", mt.input = "loss_mask"}
// CHECK-SAME: {mt.buffer = "input", mt.input = "labels"}
module @documents attributes {mt.dims = {batch = 2 : i64, head_dim = 4 : i64, heads = 1 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.reset_position_ids, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32, eod_mask_loss = true>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @wpe : !mt.tensor<[seq=4, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.wq layer @block : !mt.tensor<[hidden=4, heads=1, head_dim=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %w = mt.param_ref @block.wq : <[hidden=4, heads=1, head_dim=4], f32>
    %2 = mt.contract %1, %w over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, heads=1, head_dim=4], f32> -> <[batch=2, seq=4, heads=1, head_dim=4], f32>
    %3 = mt.attention %2, %2, %2 dims(seq, heads, heads, head_dim) causal scale 5.000000e-01 : <[batch=2, seq=4, heads=1, head_dim=4], f32>, <[batch=2, seq=4, heads=1, head_dim=4], f32>, <[batch=2, seq=4, heads=1, head_dim=4], f32>
    %4 = mt.contract %3, %w over [heads, head_dim] : <[batch=2, seq=4, heads=1, head_dim=4], f32>, <[hidden=4, heads=1, head_dim=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.add %arg0, %4 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %5 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @wpe : <[seq=4, hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.add %2, %1 : <[batch=2, seq=4, hidden=4], f32>, <[seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.repeat @block(%3) count 2 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that an explicit uneven split is kept: three layers on chunk 0, one on chunk 1.
// CHECK-LABEL: module @uneven
// CHECK-SAME: chunk_layers = array<i64: 3, 1>
// CHECK: func.func @chunk0.forward(
// CHECK-SAME: mt.chunk_layers = array<i64: 0, 3>
// CHECK: func.func @chunk1.forward(
// CHECK-SAME: mt.chunk_layers = array<i64: 3, 1>
module @uneven attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2, pipeline_layers = [3, 1]>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that virtual stages interleave the chunks over the stages (chunk c on c % pp).
// CHECK-LABEL: module @virtual
// CHECK-SAME: chunk_layers = array<i64: 1, 1, 1, 1>, chunk_stages = array<i64: 0, 1, 0, 1>, shared_params = {wte = array<i64: 0, 3>}, stages = 2 : i64, virtual_stages = 2 : i64
// CHECK: func.func @chunk3.backward(
module @virtual attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2, schedule = "interleaved", virtual_stages = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a layer count pp x virtual_stages does not divide is an error that suggests
// the FLOP-balanced explicit split.
// expected-error @+1 {{3 layers do not split into pp 2 x virtual_stages 1 = 2 equal chunks; give the split explicitly, e.g. pipeline_layers [2, 1] (balanced by FLOPs, the embedding and the head counted)}}
module @nosplit attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %7 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 3 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a model parameter read inside the layer (its gradient sums over every chunk's
// layers) is an error, not a wrong cut.
module @inside attributes {mt.dims = {batch = 2 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @lnf.g : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  mt.param @block.w1 layer @block : !mt.tensor<[hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.param_ref @block.w1 : <[hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[ffn=4, hidden=4], f32>
    %s = mt.param_ref @lnf.g : <[hidden=4], f32>
    %3 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, ffn=4], f32> -> <[batch=2, seq=4, ffn=4], f32>
    %5 = mt.contract %4, %2 over [ffn] : <[batch=2, seq=4, ffn=4], f32>, <[ffn=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %6 = mt.dropout %5 rate 1.000000e-01 stream 0 : <[batch=2, seq=4, hidden=4], f32>
    %7 = mt.add %arg0, %6 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %8 = mt.mul %7, %s : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %8 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @lnf.g : <[hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    // expected-error @below {{passes a stacked operand that is neither a layer parameter nor a saved value (a model parameter read inside the layer?), which pipeline parallelism cannot cut by layers}}
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.rms_norm %3, %1 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %4, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the tokens per expert of an MoE layer stack (mt-expert-load's counts, stacked
// over the four layers) are returned by each chunk's forward for its own two layers, after
// its residuals, and by no backward.
// CHECK-LABEL: module @moe
// CHECK: func.func @chunk0.forward(
// CHECK-SAME: {mt.buffer = "residual", mt.index = 6 : i64}, !mt.tensor<[layers=2, experts=4], i64> {mt.buffer = "expert_load"})
// CHECK-SAME: mt.chunk_layers = array<i64: 0, 2>
// CHECK: %[[FWD0:.*]]:9 = mt.repeat @block.fwd({{.*}}) count 2 {carried = 1 : i64, mt.first_instance = 0 : i64}
// CHECK: return %[[FWD0]]#0, {{.*}}, %[[FWD0]]#8 :
// CHECK-NOT: expert_load
// CHECK: func.func @chunk1.forward(
// CHECK-SAME: {mt.buffer = "residual", mt.index = 8 : i64}, !mt.tensor<[layers=2, experts=4], i64> {mt.buffer = "expert_load"})
// CHECK-SAME: mt.chunk_layers = array<i64: 2, 2>
// CHECK: %[[FWD1:.*]]:9 = mt.repeat @block.fwd({{.*}}) count 2 {carried = 1 : i64, mt.first_instance = 2 : i64}
// CHECK: return {{.*}}, %[[FWD1]]#8 :
// CHECK-NOT: expert_load
// CHECK: func.func @forward_backward(
module @moe attributes {mt.dims = {batch = 2 : i64, experts = 4 : i64, ffn = 4 : i64, hidden = 4 : i64, seq = 4 : i64, topk = 2 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<optimizer = adamw(lr = 1.000000e-03), global_batch = 2, micro_batch = 2, precision = fp32, seed = 1>} {
  mt.param @embed : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @head : !mt.tensor<[hidden=4, vocab=8], f32> init normal(2.000000e-02)
  mt.param @block.router layer @block : !mt.tensor<[hidden=4, experts=4], f32> init normal(2.000000e-02)
  mt.param @block.w1 layer @block : !mt.tensor<[experts=4, hidden=4, ffn=4], f32> init normal(2.000000e-02)
  mt.param @block.w2 layer @block : !mt.tensor<[experts=4, ffn=4, hidden=4], f32> init normal(2.000000e-02)
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.router : <[hidden=4, experts=4], f32>
    %1 = mt.param_ref @block.w1 : <[experts=4, hidden=4, ffn=4], f32>
    %2 = mt.param_ref @block.w2 : <[experts=4, ffn=4, hidden=4], f32>
    %3 = mt.contract %arg0, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, experts=4], f32> -> <[batch=2, seq=4, experts=4], f32>
    %values, %indices = mt.topk %3 over experts k topk : <[batch=2, seq=4, experts=4], f32> -> <[batch=2, seq=4, topk=2], f32>, <[batch=2, seq=4, topk=2], i32>
    %4 = mt.dispatch %arg0, %indices k topk to experts capacity capacity factor 1.000000e+00 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, topk=2], i32> -> <[experts=4, capacity=4, hidden=4], f32>
    %5 = mt.contract %4, %1 over [hidden] : <[experts=4, capacity=4, hidden=4], f32>, <[experts=4, hidden=4, ffn=4], f32> -> <[experts=4, capacity=4, ffn=4], f32>
    %6 = mt.gelu %5 approximate : <[experts=4, capacity=4, ffn=4], f32>
    %7 = mt.contract %6, %2 over [ffn] : <[experts=4, capacity=4, ffn=4], f32>, <[experts=4, ffn=4, hidden=4], f32> -> <[experts=4, capacity=4, hidden=4], f32>
    %8 = mt.combine %7, %indices, %values k topk from experts capacity capacity : <[experts=4, capacity=4, hidden=4], f32>, <[batch=2, seq=4, topk=2], i32>, <[batch=2, seq=4, topk=2], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %9 = mt.add %arg0, %8 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %9 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @embed : <[vocab=8, hidden=4], f32>
    %1 = mt.param_ref @head : <[hidden=4, vocab=8], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %4 = mt.contract %3, %1 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4, vocab=8], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %5 = mt.cross_entropy %4, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %5 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that under mixed precision (the frontend's bf16 casts of f32 parameters, one cast
// serving the embedding and the head after CSE) the tied embedding is still shared, and
// each chunk recomputes its own cast of the parameter rather than passing the bf16 copy
// between chunks; the gradients leave each chunk in f32.
// CHECK-LABEL: module @mixed
// CHECK-SAME: shared_params = {wte = array<i64: 0, 1>}
// CHECK: func.func @chunk0.forward({{.*}}%[[W0:[^:]*]]: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}
// CHECK: mt.cast %[[W0]] : <[vocab=8, hidden=4], f32> to <[vocab=8, hidden=4], bf16>
// CHECK: func.func @chunk0.backward(
// CHECK-SAME: -> (!mt.tensor<[vocab=8, hidden=4], f32> {mt.grad = @wte}
// CHECK: func.func @chunk1.forward({{.*}}%[[W1:[^:]*]]: !mt.tensor<[vocab=8, hidden=4], f32> {mt.param = @wte}
// CHECK: mt.cast %[[W1]] : <[vocab=8, hidden=4], f32> to <[vocab=8, hidden=4], bf16>
// CHECK: func.func @chunk1.backward(
// CHECK-SAME: {mt.grad = @wte}
// CHECK-NOT: <[vocab=8, hidden=4], bf16> {mt.buffer
module @mixed attributes {mt.dims = {batch = 2 : i64, head_dim = 4 : i64, heads = 1 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = bf16>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], bf16>) -> !mt.tensor<[batch=2, seq=4, hidden=4], bf16> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.cast %0 : <[hidden=4], f32> to <[hidden=4], bf16>
    %2 = mt.rms_norm %arg0, %1 over hidden : <[batch=2, seq=4, hidden=4], bf16>, <[hidden=4], bf16> -> <[batch=2, seq=4, hidden=4], bf16>
    return %2 : !mt.tensor<[batch=2, seq=4, hidden=4], bf16>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %1 = mt.cast %0 : <[vocab=8, hidden=4], f32> to <[vocab=8, hidden=4], bf16>
    %2 = mt.gather %1, %arg0 over vocab : <[vocab=8, hidden=4], bf16>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], bf16>
    %3 = mt.repeat @block(%2) count 4 : (!mt.tensor<[batch=2, seq=4, hidden=4], bf16>) -> !mt.tensor<[batch=2, seq=4, hidden=4], bf16>
    %4 = mt.cast %0 : <[vocab=8, hidden=4], f32> to <[vocab=8, hidden=4], bf16>
    %5 = mt.contract %3, %4 over [hidden] : <[batch=2, seq=4, hidden=4], bf16>, <[vocab=8, hidden=4], bf16> -> <[batch=2, seq=4, vocab=8], bf16>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], bf16>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

// -----

// Tests that a layer stack passing invariant operands to its layers (the position ids of
// --reset-position-ids, read by rope) passes them to every chunk's repeats, last, as the
// data input they are (each chunk function takes them under their input name); W's repeat
// takes them after its stash.
// CHECK-LABEL: module @invariant
// CHECK: func.func @chunk0.forward({{.*}}%[[F0:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.buffer = "input", mt.input = "layer_ids"}
// CHECK: mt.repeat @block.fwd({{.*}}, %[[F0]]) count 2 {carried = 1 : i64, invariant = 1 : i64
// CHECK: func.func @chunk0.backward_input({{.*}}%[[B0:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.buffer = "input", mt.input = "layer_ids"}
// CHECK: mt.repeat @block.bwd.input({{.*}}, %[[B0]]) count 2 {carried = 1 : i64, invariant = 1 : i64
// CHECK: func.func @chunk0.backward_weight(%[[S0:[^:]*]]: {{.*}} {mt.buffer = "stash", mt.index = 0 : i64}, %[[S1:[^:]*]]: {{.*}}%[[W0:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.buffer = "input", mt.input = "layer_ids"}
// CHECK: mt.repeat @block.bwd.weight(%{{[^,]*}}, %{{[^,]*}}, %[[S0]], %[[S1]], %[[W0]]) count 2 {carried = 0 : i64, invariant = 1 : i64
// CHECK: func.func @chunk1.forward({{.*}}%[[F1:[^:]*]]: !mt.tensor<[batch=2, seq=4], i32> {mt.buffer = "input", mt.input = "layer_ids"}
// CHECK: mt.repeat @block.fwd({{.*}}, %[[F1]]) count 2 {carried = 1 : i64, invariant = 1 : i64, mt.first_instance = 2
module @invariant attributes {mt.dims = {batch = 2 : i64, hidden = 4 : i64, seq = 4 : i64, vocab = 8 : i64}, mt.parallel = #mt.parallel<pp = 2>, mt.train = #mt.train<global_batch = 2, micro_batch = 2, optimizer = adamw(lr = 1.0e-3), precision = fp32>} {
  mt.param @wte : !mt.tensor<[vocab=8, hidden=4], f32> init normal(2.000000e-02)
  mt.param @block.g layer @block : !mt.tensor<[hidden=4], f32> init ones
  func.func @block(%arg0: !mt.tensor<[batch=2, seq=4, hidden=4], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32> attributes {mt.layer} {
    %0 = mt.param_ref @block.g : <[hidden=4], f32>
    %1 = mt.rms_norm %arg0, %0 over hidden : <[batch=2, seq=4, hidden=4], f32>, <[hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    %2 = mt.rope %1 over hidden position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %3 = mt.add %arg0, %2 : <[batch=2, seq=4, hidden=4], f32>, <[batch=2, seq=4, hidden=4], f32> -> <[batch=2, seq=4, hidden=4], f32>
    return %3 : !mt.tensor<[batch=2, seq=4, hidden=4], f32>
  }
  func.func @forward(%arg0: !mt.tensor<[batch=2, seq=4], i32>, %arg1: !mt.tensor<[batch=2, seq=4], i32>, %ids: !mt.tensor<[batch=2, seq=4], i32> {mt.input = "layer_ids"}) -> !mt.tensor<[], f32> {
    %0 = mt.param_ref @wte : <[vocab=8, hidden=4], f32>
    %2 = mt.gather %0, %arg0 over vocab : <[vocab=8, hidden=4], f32>, <[batch=2, seq=4], i32> -> <[batch=2, seq=4, hidden=4], f32>
    %3 = mt.repeat @block(%2, %ids) count 4 {carried = 1 : i64, invariant = 1 : i64} : (!mt.tensor<[batch=2, seq=4, hidden=4], f32>, !mt.tensor<[batch=2, seq=4], i32>) -> !mt.tensor<[batch=2, seq=4, hidden=4], f32>
    %5 = mt.contract %3, %0 over [hidden] : <[batch=2, seq=4, hidden=4], f32>, <[vocab=8, hidden=4], f32> -> <[batch=2, seq=4, vocab=8], f32>
    %6 = mt.cross_entropy %5, %arg1 over vocab : <[batch=2, seq=4, vocab=8], f32>, <[batch=2, seq=4], i32> -> <[], f32>
    return %6 : !mt.tensor<[], f32>
  }
}

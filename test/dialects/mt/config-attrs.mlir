// RUN: mt-opt %s -split-input-file | mt-opt -split-input-file | FileCheck %s
// RUN: mt-opt %s -split-input-file -mlir-print-op-generic | mt-opt -split-input-file | FileCheck %s

// Tests that #mt.train round-trips every field, printed in its fixed order whatever the
// order written, with betas as a pair and words bare.
// CHECK-LABEL: module @train_all
// CHECK-SAME: mt.train = #mt.train<optimizer = adamw(lr = 3.000000e-04, betas = (9.000000e-01, 0.94999999999999996), eps = 1.000000e-08, weight_decay = 1.000000e-01), lr = cosine(warmup = 100, min = 3.000000e-05, decay_steps = 1000), global_batch = 32, micro_batch = 4, clip_grad = 1.000000e+00, precision = bf16, seed = 1234, steps = 5000, dropout = false, eod_mask_loss = true>
module @train_all attributes {mt.train = #mt.train<eod_mask_loss = true, dropout = false, steps = 5000, seed = 1234,
    precision = bf16, clip_grad = 1.0, micro_batch = 4, global_batch = 32,
    lr = cosine(warmup = 100, min = 3.0e-5, decay_steps = 1000),
    optimizer = adamw(lr = 3.0e-4, betas = (0.9, 0.95), eps = 1.0e-8, weight_decay = 0.1)>} {
}

// -----

// Tests that absent fields stay absent: an empty #mt.train, sgd with momentum, and a
// schedule and an optimizer without arguments.
// CHECK-LABEL: module @train_sparse
// CHECK-SAME: mt.train = #mt.train<optimizer = sgd(lr = 1.000000e-01, momentum = 9.000000e-01), lr = linear(warmup = 2)>
// CHECK-LABEL: module @train_empty
// CHECK-SAME: mt.train = #mt.train<>
// CHECK-LABEL: module @train_bare
// CHECK-SAME: mt.train = #mt.train<optimizer = adamw, lr = constant>
module @outer {
  module @train_sparse attributes {mt.train = #mt.train<optimizer = sgd(lr = 0.1, momentum = 0.9), lr = linear(warmup = 2)>} {
  }
  module @train_empty attributes {mt.train = #mt.train<>} {
  }
  module @train_bare attributes {mt.train = #mt.train<optimizer = adamw, lr = constant>} {
  }
}

// -----

// Tests that #mt.parallel round-trips every field: degrees, switches, a schedule word that
// is no keyword (quoted), a layout and an explicit pipeline split.
// CHECK-LABEL: module @parallel_all
// CHECK-SAME: mt.parallel = #mt.parallel<tp = 2, pp = 2, dp = 2, cp = 2, ep = 2, etp = 1, sp = true, schedule = "zb-h1", micro_batches = 8, recompute = selective, distributed_optimizer = true, layout = {ffn: tp, heads: tp}, pipeline_layers = [3, 1]>
module @parallel_all attributes {mt.parallel = #mt.parallel<pipeline_layers = [3, 1],
    layout = {heads: tp, ffn: tp}, distributed_optimizer = true, recompute = "selective",
    micro_batches = 8, schedule = "zb-h1", sp = true, etp = 1, ep = 2, cp = 2, dp = 2, pp = 2, tp = 2>} {
}

// -----

// Tests the pipeline forms: interleaved with virtual stages and an uneven split over the
// pp x virtual-stages chunks; zb-v's implied two chunks; `auto`; and no field at all.
// CHECK-LABEL: module @interleaved
// CHECK-SAME: mt.parallel = #mt.parallel<pp = 2, schedule = interleaved, virtual_stages = 2, pipeline_layers = [2, 1, 1, 2]>
// CHECK-LABEL: module @zb_v
// CHECK-SAME: mt.parallel = #mt.parallel<pp = 2, schedule = "zb-v", pipeline_layers = [1, 1, 1, 1]>
// CHECK-LABEL: module @gpipe
// CHECK-SAME: mt.parallel = #mt.parallel<pp = 4, schedule = gpipe>
// CHECK-LABEL: module @auto
// CHECK-SAME: mt.parallel = #mt.parallel<auto>
// CHECK-LABEL: module @none
// CHECK-SAME: mt.parallel = #mt.parallel<>
module @outer {
  module @interleaved attributes {mt.parallel = #mt.parallel<pp = 2, schedule = interleaved, virtual_stages = 2, pipeline_layers = [2, 1, 1, 2]>} {
  }
  module @zb_v attributes {mt.parallel = #mt.parallel<pp = 2, schedule = "zb-v", pipeline_layers = [1, 1, 1, 1]>} {
  }
  module @gpipe attributes {mt.parallel = #mt.parallel<pp = 4, schedule = gpipe>} {
  }
  module @auto attributes {mt.parallel = #mt.parallel<auto>} {
  }
  module @none attributes {mt.parallel = #mt.parallel<>} {
  }
}

// -----

// Tests that a split matching the layer stack of @forward (2 + 2 layers here) verifies.
// CHECK-LABEL: module @split_matches
// CHECK-SAME: pipeline_layers = [3, 1]
module @split_matches attributes {mt.parallel = #mt.parallel<pp = 2, pipeline_layers = [3, 1]>} {
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %0 = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    %1 = mt.repeat @block(%0) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %1 : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests the standalone optimizer and schedule attributes.
// CHECK-LABEL: func.func @standalone
// CHECK-SAME: opt = #mt.optimizer<sgd(lr = 5.000000e-01)>
// CHECK-SAME: sched = #mt.lr_schedule<cosine(min = 0.000000e+00)>
func.func @standalone() attributes {opt = #mt.optimizer<sgd(lr = 0.5)>, sched = #mt.lr_schedule<cosine(min = 0.0)>} {
  return
}

// RUN: mt-opt %s -split-input-file -mt-optimizer -verify-diagnostics

// Tests that a decaying schedule needs a horizon beyond its warm-up.
// expected-error @+1 {{decays over 'decay_steps' (or train { steps }), which must exceed the warm-up of 1.000000e+01 steps}}
module attributes {mt.train = {lr = {kind = "cosine", warmup = 10 : i64}}} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
}

// -----

// Tests that an optimizer the pass does not implement is an error, not a silent AdamW.
// expected-error @+1 {{unknown optimizer 'adam'; expected one of 'adamw' 'sgd'}}
module attributes {mt.train = {optimizer = {kind = "adam", lr = 1.0e-03 : f64}}} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
}

// -----

// Tests that an optimizer without a kind is an error.
// expected-error @+1 {{unknown optimizer (no 'kind'); expected one of 'adamw' 'sgd'}}
module attributes {mt.train = {optimizer = {lr = 1.0e-03 : f64}}} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
}

// -----

// Tests that a learning-rate schedule the pass does not implement is an error, not a
// silent constant rate.
// expected-error @+1 {{unknown learning-rate schedule 'step'; expected one of 'constant' 'cosine' 'linear'}}
module attributes {mt.train = {lr = {kind = "step"}}} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
}

// -----

// Tests that the pass refuses to run twice.
// expected-error @+1 {{module already has an optimizer step}}
module {
  func.func @optimizer_step() {
    return
  }
}

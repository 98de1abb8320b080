// RUN: mt-opt %s -split-input-file -mt-optimizer -verify-diagnostics

// Tests that a decaying schedule needs a horizon beyond its warm-up.
// expected-error @+1 {{decays over 'decay_steps' (or train { steps }), which must exceed the warm-up of 1.000000e+01 steps}}
module attributes {mt.train = #mt.train<lr = cosine(warmup = 10)>} {
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

// RUN: mt-opt %s -split-input-file -verify-diagnostics

// Tests that an optimizer the dialect does not know is an error, not a silent AdamW.
// expected-error @+1 {{unknown optimizer 'adam'}}
module attributes {mt.train = #mt.train<optimizer = adam(lr = 1.0e-3)>} {
}

// -----

// Tests that a learning-rate schedule the dialect does not know is an error, not a silent
// constant rate.
// expected-error @+1 {{unknown learning-rate schedule 'step'}}
module attributes {mt.train = #mt.train<lr = step>} {
}

// -----

// Tests that an argument of another optimizer is refused.
// expected-error @+1 {{sgd takes no betas (adamw does)}}
module attributes {mt.train = #mt.train<optimizer = sgd(lr = 0.1, betas = (0.9, 0.95))>} {
}

// -----

// Tests that adamw's betas are two fractions.
// expected-error @+1 {{adamw betas must be two numbers in [0, 1)}}
module attributes {mt.train = #mt.train<optimizer = adamw(betas = (0.9, 1.5))>} {
}

// -----

// Tests that the constant schedule takes only a warm-up.
// expected-error @+1 {{the constant learning-rate schedule takes only 'warmup'}}
module attributes {mt.train = #mt.train<lr = constant(decay_steps = 10)>} {
}

// -----

// Tests that the global batch is a multiple of the micro-batch.
// expected-error @+1 {{global_batch 6 is not a multiple of micro_batch 4}}
module attributes {mt.train = #mt.train<global_batch = 6, micro_batch = 4>} {
}

// -----

// Tests that an unknown field is named with the expected ones.
// expected-error @+1 {{unknown train field 'epochs'; expected 'optimizer' 'lr'}}
module attributes {mt.train = #mt.train<epochs = 3>} {
}

// -----

// Tests that a field given twice is an error.
// expected-error @+1 {{parallel field 'tp' given twice}}
module attributes {mt.parallel = #mt.parallel<tp = 2, tp = 4>} {
}

// -----

// Tests that a degree below 1 is refused.
// expected-error @+1 {{pp must be at least 1, got 0}}
module attributes {mt.parallel = #mt.parallel<pp = 0>} {
}

// -----

// Tests that the expert weights' tensor-parallel degree is a degree too.
// expected-error @+1 {{etp must be at least 1, got 0}}
module attributes {mt.parallel = #mt.parallel<tp = 2, etp = 0>} {
}

// -----

// Tests that a schedule the dialect does not know is refused (the DSL's 'zero-bubble' is
// an alias the frontend resolves to zb-h1; the IR holds only the five names).
// expected-error @+1 {{unknown pipeline schedule 'zero-bubble'}}
module attributes {mt.parallel = #mt.parallel<pp = 2, schedule = "zero-bubble">} {
}

// -----

// Tests that the interleaved schedule needs virtual stages.
// expected-error @+1 {{the interleaved schedule needs virtual stages: set virtual_stages above 1}}
module attributes {mt.parallel = #mt.parallel<pp = 2, schedule = interleaved>} {
}

// -----

// Tests that virtual stages need a pipeline.
// expected-error @+1 {{virtual_stages 2 needs pipeline parallelism: set pp above 1}}
module attributes {mt.parallel = #mt.parallel<virtual_stages = 2>} {
}

// -----

// Tests that virtual stages need a schedule that runs several chunks per stage.
// expected-error @+1 {{virtual_stages 2 needs the interleaved (or zb-v) schedule, not 1f1b}}
module attributes {mt.parallel = #mt.parallel<pp = 2, virtual_stages = 2, schedule = "1f1b">} {
}

// -----

// Tests that zb-v runs exactly two chunks per stage.
// expected-error @+1 {{the zb-v schedule runs 2 model chunks per stage (its V shape), not virtual_stages 3}}
module attributes {mt.parallel = #mt.parallel<pp = 2, virtual_stages = 3, schedule = "zb-v">} {
}

// -----

// Tests that the split lists one entry per chunk (pp x virtual stages).
// expected-error @+1 {{pipeline_layers has 2 entries; pp 2 x 2 virtual stages needs 4}}
module attributes {mt.parallel = #mt.parallel<pp = 2, virtual_stages = 2, schedule = interleaved, pipeline_layers = [2, 2]>} {
}

// -----

// Tests that every chunk of the split holds a layer.
// expected-error @+1 {{pipeline_layers gives a chunk 0 layers; each needs at least 1}}
module attributes {mt.parallel = #mt.parallel<pp = 2, pipeline_layers = [4, 0]>} {
}

// -----

// Tests that the split covers the layer stack of @forward exactly (2 layers here).
// expected-error @+1 {{'mt.parallel' pipeline_layers: the split sums to 3 layers; the model has 2}}
module attributes {mt.parallel = #mt.parallel<pp = 2, pipeline_layers = [2, 1]>} {
  func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=4], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
    %0 = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
    return %0 : !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a layout names mesh axes only.
// expected-error @+1 {{layout maps 'heads' to an unknown mesh axis; expected dp, tp, pp, cp or ep}}
module attributes {mt.parallel = #mt.parallel<tp = 2, layout = {heads: xp}>} {
}

// -----

// Tests that 'auto' stands alone.
// expected-error @+1 {{expected '>'}}
module attributes {mt.parallel = #mt.parallel<auto, tp = 2>} {
}

// -----

// Tests that mt.parallel must be the typed attribute (the dictionary of earlier versions
// is refused).
// expected-error @+1 {{'builtin.module' op 'mt.parallel' must be a #mt.parallel<...> attribute, got {tp = 2 : i64}}}
module attributes {mt.parallel = {tp = 2 : i64}} {
}

// -----

// Tests that mt.train must be the typed attribute.
// expected-error @+1 {{'builtin.module' op 'mt.train' must be a #mt.train<...> attribute}}
module attributes {mt.train = {seed = 1 : i64}} {
}

// -----

// Tests that the settings belong on a module.
// expected-error @+1 {{'func.func' op 'mt.train' belongs on the module}}
func.func @f() attributes {mt.train = #mt.train<>} {
  return
}

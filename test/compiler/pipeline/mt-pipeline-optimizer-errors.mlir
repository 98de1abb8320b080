// RUN: mt-opt %s -split-input-file -verify-diagnostics --mt-pipeline-optimizer

// Tests that the pass needs the outlined whole-model step to build the stages' steps from.
// expected-error @+1 {{mt-pipeline-optimizer builds the stages' optimizer steps from the outlined @optimizer_step: run it after mt-optimizer, mt-outline-parameters and mt-pipeline-chunks}}
module attributes {mt.pipeline = {chunk_layers = array<i64: 1, 1>, chunk_stages = array<i64: 0, 1>, shared_params = {}, stages = 2 : i64, virtual_stages = 1 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4], f32> init ones
}

// -----

// Tests that a chunk placed on a stage outside the pipeline is an error, not a crash.
// expected-error @+1 {{'mt.pipeline' must give chunk_layers and chunk_stages (one stage in [0, stages) per chunk), stages and shared_params}}
module attributes {mt.outlined, mt.pipeline = {chunk_layers = array<i64: 1, 1>, chunk_stages = array<i64: 0, 2>, shared_params = {}, stages = 2 : i64, virtual_stages = 1 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4], f32> init ones
  func.func @optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>,
                            %dw: !mt.tensor<[hidden=4], f32> {mt.grad = @w},
                            %w: !mt.tensor<[hidden=4], f32> {mt.param = @w})
      -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[hidden=4], f32> {mt.param = @w})
      attributes {mt.grads = [@w], mt.optimizer} {
    return %step, %step, %w : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that a parameter no chunk function takes is an error: no stage would update it.
module attributes {mt.outlined, mt.pipeline = {chunk_layers = array<i64: 1, 1>, chunk_stages = array<i64: 0, 1>, shared_params = {}, stages = 2 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{'mt.param' op is read by no pipeline chunk, so no stage would update it}}
  mt.param @w : !mt.tensor<[hidden=4], f32> init ones
  func.func @optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>,
                            %dw: !mt.tensor<[hidden=4], f32> {mt.grad = @w},
                            %w: !mt.tensor<[hidden=4], f32> {mt.param = @w})
      -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[hidden=4], f32> {mt.param = @w})
      attributes {mt.grads = [@w], mt.optimizer} {
    return %step, %step, %w : !mt.tensor<[], f32>, !mt.tensor<[], f32>, !mt.tensor<[hidden=4], f32>
  }
}

// -----

// Tests that running the pass twice is an error naming a stage function already there.
module attributes {mt.outlined, mt.pipeline = {chunk_layers = array<i64: 1, 1>, chunk_stages = array<i64: 0, 1>, shared_params = {}, stages = 2 : i64, virtual_stages = 1 : i64}} {
  func.func @optimizer_step(%step: !mt.tensor<[], f32>, %scale: !mt.tensor<[], f32>)
      -> (!mt.tensor<[], f32>, !mt.tensor<[], f32>) attributes {mt.optimizer} {
    return %step, %step : !mt.tensor<[], f32>, !mt.tensor<[], f32>
  }
  // expected-error @+1 {{'func.func' op is a pipeline stage function already: the module has its stages' optimizer steps}}
  func.func @stage0.grad_squares(%scale: !mt.tensor<[], f32>) -> !mt.tensor<[], f32>
      attributes {mt.optimizer, mt.pipeline_stage = 0 : i64} {
    return %scale : !mt.tensor<[], f32>
  }
}

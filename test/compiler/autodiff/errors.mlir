// RUN: mt-opt %s -split-input-file -mt-autodiff -verify-diagnostics
// RUN: not mt-opt %s -split-input-file -mt-autodiff=recompute=sometimes 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: unknown recompute policy 'sometimes'; expected none, selective or full

// Tests that autodiff needs the entry function.
// expected-error @+1 {{autodiff needs the entry function 'forward'}}
module {
  func.func @main() {
    return
  }
}

// -----

// Tests that a layer applied by two repeats is rejected.
module {
  // expected-error @+1 {{is applied by more than one mt.repeat}}
  func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
    return %x : !mt.tensor<[hidden=8], f32>
  }
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[], f32> {
    %a = mt.repeat @block(%x) count 2 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
    %b = mt.repeat @block(%a) count 2 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
    %l = mt.reduce_sum %b over [hidden] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that the entry must return the scalar loss.
module {
  // expected-error @+1 {{must return one scalar, the loss}}
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> {
    return %x : !mt.tensor<[hidden=8], f32>
  }
}

// -----

// Tests that a parameter must not use the dimension name reserved for the layer stack.
module {
  // expected-error @+1 {{has a dimension named 'layers'}}
  mt.param @p : !mt.tensor<[layers=2], f32> init zeros
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[], f32> {
    %l = mt.reduce_sum %x over [hidden] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// -----

// Tests that an op without a gradient rule on the path to the loss is reported.
module {
  func.func @forward(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[], f32> {
    // expected-error @+1 {{has no gradient rule}}
    %g = mt.gelu_grad %x : !mt.tensor<[hidden=8], f32>
    %l = mt.reduce_sum %g over [hidden] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// RUN: mt-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Tensor type
//===----------------------------------------------------------------------===//

// Tests that a tensor type may not name a dimension twice.
// expected-error @+1 {{duplicate dimension name 'seq' in tensor type}}
func.func @duplicate_dim(%x: !mt.tensor<[seq=4, hidden=8, seq=4], f32>)

// -----

// Tests that a dimension of size zero is rejected.
// expected-error @+1 {{dimension 'seq' must have a positive size, got 0}}
func.func @zero_size(%x: !mt.tensor<[seq=0], f32>)

// -----

// Tests that a negative dimension size is rejected.
// expected-error @+1 {{dimension 'hidden' must have a positive size, got -8}}
func.func @negative_size(%x: !mt.tensor<[hidden=-8], f32>)

// -----

// Tests that an integer width the dialect does not support is rejected.
// expected-error @+1 {{unsupported tensor element type 'i16'; expected f64, f32, f16, bf16, i1, i8, i32 or i64}}
func.func @bad_int_element(%x: !mt.tensor<[seq=4], i16>)

// -----

// Tests that a non-numeric element type is rejected.
// expected-error @+1 {{unsupported tensor element type 'index'}}
func.func @bad_index_element(%x: !mt.tensor<[seq=4], index>)

// -----

// Tests that a dimension needs a non-empty name.
// expected-error @+1 {{tensor dimension without a name}}
func.func @empty_name(%x: !mt.tensor<[""=4], f32>)

//===----------------------------------------------------------------------===//
// Initialisers and mt.param
//===----------------------------------------------------------------------===//

// -----

// Tests that `zeros` takes no arguments.
// expected-error @+1 {{initialiser 'zeros' takes 0 arguments, got 1}}
mt.param @p : !mt.tensor<[hidden=8], f32> init zeros(1.0)

// -----

// Tests that `uniform` needs both bounds.
// expected-error @+1 {{initialiser 'uniform' takes 2 arguments, got 1}}
mt.param @p : !mt.tensor<[hidden=8], f32> init uniform(0.1)

// -----

// Tests that `normal` takes a standard deviation and an optional mean, no more.
// expected-error @+1 {{initialiser 'normal' takes 1 or 2 arguments, got 3}}
mt.param @p : !mt.tensor<[hidden=8], f32> init normal(0.1, 0.0, 1.0)

// -----

// Tests that `normal` needs its standard deviation.
// expected-error @+1 {{initialiser 'normal' takes 1 or 2 arguments, got 0}}
mt.param @p : !mt.tensor<[hidden=8], f32> init normal

// -----

// Tests that `constant` needs exactly one value.
// expected-error @+1 {{initialiser 'constant' takes 1 argument, got 2}}
mt.param @p : !mt.tensor<[hidden=8], f32> init constant(1.0, 2.0)

// -----

// Tests that a negative standard deviation is rejected.
// expected-error @+1 {{normal initialiser needs a non-negative standard deviation, got -2.000000e-02}}
mt.param @p : !mt.tensor<[hidden=8], f32> init normal(-0.02)

// -----

// Tests that a uniform initialiser needs low <= high.
// expected-error @+1 {{uniform initialiser needs low <= high, got (1.000000e+00, 5.000000e-01)}}
mt.param @p : !mt.tensor<[hidden=8], f32> init uniform(1.0, 0.5)

// -----

// Tests that an unknown initialiser kind is rejected.
// expected-error @+1 {{unknown initialiser 'xavier'; expected zeros, ones, normal, uniform or constant}}
mt.param @p : !mt.tensor<[hidden=8], f32> init xavier(1.0)

// -----

// Tests that the attribute form `#mt.init<...>` is verified too.
// expected-error @+1 {{initialiser 'ones' takes 0 arguments, got 1}}
"mt.param"() <{sym_name = "p", type = !mt.tensor<[hidden=8], f32>, init = #mt.init<ones(1.0)>}> : () -> ()

// -----

// Tests that a parameter must hold floating-point values.
// expected-error @+1 {{'mt.param' op parameter 'p' must have a floating-point element type, got 'i32'}}
mt.param @p : !mt.tensor<[hidden=8], i32> init zeros

// -----

// Tests that a parameter's layer must exist.
// expected-error @+1 {{'mt.param' op layer 'block' of parameter 'p' does not name a function}}
mt.param @p layer @block : !mt.tensor<[hidden=8], f32> init ones

// -----

// Tests that a parameter's layer must be a function marked `mt.layer`.
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> {
  return %x : !mt.tensor<[hidden=8], f32>
}
// expected-error @+1 {{'mt.param' op layer 'block' of parameter 'p' is not a layer (a func.func marked 'mt.layer')}}
mt.param @p layer @block : !mt.tensor<[hidden=8], f32> init ones

//===----------------------------------------------------------------------===//
// mt.param_ref
//===----------------------------------------------------------------------===//

// -----

// Tests that param_ref must name an existing symbol.
func.func @missing() {
  // expected-error @+1 {{'mt.param_ref' op 'nothing' does not name an mt.param}}
  %0 = mt.param_ref @nothing : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that param_ref must name an mt.param, not some other symbol.
func.func @not_a_param() {
  // expected-error @+1 {{'mt.param_ref' op 'not_a_param' does not name an mt.param}}
  %0 = mt.param_ref @not_a_param : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that param_ref's type must be the parameter's type.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
func.func @wrong_type() {
  // expected-error @+1 {{'mt.param_ref' op type '!mt.tensor<[hidden=8], bf16>' does not match parameter 'w' of type '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.param_ref @w : !mt.tensor<[hidden=8], bf16>
  return
}

// -----

// Tests that outside its layer a layer parameter is read with all its instances stacked.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @forward() {
  // expected-error @+1 {{'mt.param_ref' op outside layer 'block', parameter 'block.g' is read with all its instances: expected its type '!mt.tensor<[hidden=8], f32>' with a leading 'layers' dimension, got '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.param_ref @block.g : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a layer parameter cannot be read inside another layer.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @other(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  // expected-error @+1 {{'mt.param_ref' op parameter 'block.g' belongs to layer 'block' and can only be read inside it}}
  %0 = mt.param_ref @block.g : !mt.tensor<[hidden=8], f32>
  return %x : !mt.tensor<[hidden=8], f32>
}

// -----

// Tests that assign checks the target's type like param_ref.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
func.func @assign_wrong(%v: !mt.tensor<[ffn=8], f32>) {
  // expected-error @+1 {{'mt.assign' op type '!mt.tensor<[ffn=8], f32>' does not match parameter 'w' of type '!mt.tensor<[hidden=8], f32>'}}
  mt.assign @w, %v : !mt.tensor<[ffn=8], f32>
  return
}

// -----

// Tests that a state is read with its storage type.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
func.func @state_wrong() {
  // expected-error @+1 {{'mt.param_ref' op type '!mt.tensor<[hidden=4], f32>' does not match state 'w.m' of type '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.param_ref @w.m : !mt.tensor<[hidden=4], f32>
  return
}

// -----

// Tests that param_ref needs a parameter or a state.
func.func @nothing() {
  // expected-error @+1 {{'mt.param_ref' op 'nowhere' does not name an mt.param or mt.state}}
  %0 = mt.param_ref @nowhere : !mt.tensor<[hidden=4], f32>
  return
}

// -----

// Tests that a layer's parameter cannot be read inside another layer.
mt.param @a.g layer @a : !mt.tensor<[hidden=8], f32> init ones
func.func @a(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @b(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  // expected-error @+1 {{parameter 'a.g' belongs to layer 'a' and can only be read inside it}}
  %0 = mt.param_ref @a.g : !mt.tensor<[hidden=8], f32>
  return %x : !mt.tensor<[hidden=8], f32>
}

//===----------------------------------------------------------------------===//
// mt.constant
//===----------------------------------------------------------------------===//

// -----

// Tests that a constant is a scalar.
func.func @constant_with_dims() {
  // expected-error @+1 {{'mt.constant' op must produce a scalar (no dimensions), got [hidden=8]}}
  %0 = mt.constant 1.0 : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a constant is floating-point.
func.func @integer_constant() {
  // expected-error @+1 {{'mt.constant' op expects floating-point result, got element type 'i32'}}
  %0 = mt.constant 1.0 : !mt.tensor<[], i32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

// Tests that a dimension shared by both operands must agree in size.
func.func @broadcast_mismatch(%a: !mt.tensor<[batch=2, seq=4], f32>, %b: !mt.tensor<[seq=8], f32>) {
  // expected-error @+1 {{'mt.add' op dimension 'seq' has size 4 in the lhs but 8 in the rhs}}
  %0 = mt.add %a, %b : !mt.tensor<[batch=2, seq=4], f32>, !mt.tensor<[seq=8], f32> -> !mt.tensor<[batch=2, seq=4], f32>
  return
}

// -----

// Tests that binary operands must have one element type.
func.func @binary_element_mismatch(%a: !mt.tensor<[seq=4], f32>, %b: !mt.tensor<[seq=4], bf16>) {
  // expected-error @+1 {{'mt.sub' op operands have different element types 'f32' and 'bf16'}}
  %0 = mt.sub %a, %b : !mt.tensor<[seq=4], f32>, !mt.tensor<[seq=4], bf16> -> !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that the broadcast result keeps the lhs dimensions first.
func.func @binary_wrong_order(%a: !mt.tensor<[batch=2], f32>, %b: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.mul' op result type '!mt.tensor<[seq=4, batch=2], f32>' does not match the expected '!mt.tensor<[batch=2, seq=4], f32>'}}
  %0 = mt.mul %a, %b : !mt.tensor<[batch=2], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4, batch=2], f32>
  return
}

// -----

// Tests that a binary result cannot drop a dimension.
func.func @binary_missing_dim(%a: !mt.tensor<[batch=2, seq=4], f32>, %b: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.div' op result type '!mt.tensor<[batch=2], f32>' does not match the expected '!mt.tensor<[batch=2, seq=4], f32>'}}
  %0 = mt.div %a, %b : !mt.tensor<[batch=2, seq=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[batch=2], f32>
  return
}

// -----

// Tests that the binary result keeps the operands' element type.
func.func @binary_result_element(%a: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.max' op result type '!mt.tensor<[seq=4], bf16>' does not match the expected '!mt.tensor<[seq=4], f32>'}}
  %0 = mt.max %a, %a : !mt.tensor<[seq=4], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4], bf16>
  return
}

// -----

// Tests that pow needs floating-point operands.
func.func @integer_pow(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.pow' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.pow %a, %a : !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that the transcendental unary ops need floating-point operands.
func.func @integer_exp(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.exp' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.exp %a : !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that gelu needs a floating-point operand.
func.func @integer_gelu(%a: !mt.tensor<[seq=4], i64>) {
  // expected-error @+1 {{'mt.gelu' op expects floating-point operand, got element type 'i64'}}
  %0 = mt.gelu %a approximate : !mt.tensor<[seq=4], i64>
  return
}

// -----

// Tests that a unary op keeps its operand's type.
func.func @unary_type_change(%a: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.neg' op requires the same type for all operands and results}}
  %0 = "mt.neg"(%a) : (!mt.tensor<[seq=4], f32>) -> !mt.tensor<[seq=4], bf16>
  return
}

// -----

// Tests that mt ops only take named-dimension tensors.
func.func @builtin_tensor(%a: tensor<4xf32>) {
  // expected-error @+1 {{'mt.exp' op operand #0 must be named-dimension tensor, but got 'tensor<4xf32>'}}
  %0 = "mt.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that cast changes only the element type.
func.func @cast_changes_dims(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.cast' op result type '!mt.tensor<[hidden=8, seq=4], bf16>' does not match the expected '!mt.tensor<[seq=4, hidden=8], bf16>'}}
  %0 = mt.cast %a : !mt.tensor<[seq=4, hidden=8], f32> to !mt.tensor<[hidden=8, seq=4], bf16>
  return
}

// -----

// Tests that transpose only reorders: no new dimension.
func.func @transpose_new_dim(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.transpose' op result [hidden=8, ffn=4] of 'f32' is not a reordering of the operand [seq=4, hidden=8] of 'f32'}}
  %0 = mt.transpose %a : !mt.tensor<[seq=4, hidden=8], f32> to !mt.tensor<[hidden=8, ffn=4], f32>
  return
}

// -----

// Tests that transpose keeps sizes.
func.func @transpose_resize(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{is not a reordering of the operand [seq=4, hidden=8]}}
  %0 = mt.transpose %a : !mt.tensor<[seq=4, hidden=8], f32> to !mt.tensor<[hidden=4, seq=8], f32>
  return
}

// -----

// Tests that transpose keeps the element type.
func.func @transpose_element(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.transpose' op result [hidden=8, seq=4] of 'bf16' is not a reordering of the operand [seq=4, hidden=8] of 'f32'}}
  %0 = mt.transpose %a : !mt.tensor<[seq=4, hidden=8], f32> to !mt.tensor<[hidden=8, seq=4], bf16>
  return
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

// -----

// Tests that both operands must have every contracted dimension (rhs lacks it).
func.func @contract_rhs_lacks(%a: !mt.tensor<[seq=4, hidden=8], f32>, %b: !mt.tensor<[ffn=16], f32>) {
  // expected-error @+1 {{'mt.contract' op cannot contract over 'hidden': the rhs operand [ffn=16] has no such dimension}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[ffn=16], f32> -> !mt.tensor<[seq=4, ffn=16], f32>
  return
}

// -----

// Tests that both operands must have every contracted dimension (lhs lacks it).
func.func @contract_lhs_lacks(%a: !mt.tensor<[seq=4], f32>, %b: !mt.tensor<[hidden=8, ffn=16], f32>) {
  // expected-error @+1 {{'mt.contract' op cannot contract over 'hidden': the lhs operand [seq=4] has no such dimension}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[seq=4], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[seq=4, ffn=16], f32>
  return
}

// -----

// Tests that a contraction contracts over something.
func.func @contract_over_nothing(%a: !mt.tensor<[seq=4], f32>, %b: !mt.tensor<[ffn=16], f32>) {
  // expected-error @+1 {{'mt.contract' op contraction needs at least one dimension to contract over}}
  %0 = mt.contract %a, %b over [] : !mt.tensor<[seq=4], f32>, !mt.tensor<[ffn=16], f32> -> !mt.tensor<[seq=4, ffn=16], f32>
  return
}

// -----

// Tests that a dimension is contracted once.
func.func @contract_duplicate(%a: !mt.tensor<[seq=4, hidden=8], f32>, %b: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.contract' op dimension 'hidden' is listed twice in 'over'}}
  %0 = mt.contract %a, %b over [hidden, hidden] : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that the contraction result type is checked.
func.func @contract_wrong_result(%a: !mt.tensor<[seq=4, hidden=8], f32>, %b: !mt.tensor<[hidden=8, ffn=16], f32>) {
  // expected-error @+1 {{'mt.contract' op result type '!mt.tensor<[ffn=16, seq=4], f32>' does not match the expected '!mt.tensor<[seq=4, ffn=16], f32>'}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[ffn=16, seq=4], f32>
  return
}

// -----

// Tests that contracted operands share an element type.
func.func @contract_element_mismatch(%a: !mt.tensor<[hidden=8], f32>, %b: !mt.tensor<[hidden=8], bf16>) {
  // expected-error @+1 {{'mt.contract' op operands have different element types 'f32' and 'bf16'}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that contraction needs floating-point operands.
func.func @contract_integer(%a: !mt.tensor<[hidden=8], i32>) {
  // expected-error @+1 {{'mt.contract' op expects floating-point lhs, got element type 'i32'}}
  %0 = mt.contract %a, %a over [hidden] : !mt.tensor<[hidden=8], i32>, !mt.tensor<[hidden=8], i32> -> !mt.tensor<[], i32>
  return
}

// -----

// Tests that a batch dimension must have one size in both operands.
func.func @contract_batch_mismatch(%a: !mt.tensor<[batch=2, hidden=8], f32>, %b: !mt.tensor<[batch=3, hidden=8], f32>) {
  // expected-error @+1 {{'mt.contract' op dimension 'batch' has size 2 in the lhs but 3 in the rhs}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=3, hidden=8], f32> -> !mt.tensor<[batch=2], f32>
  return
}

// -----

// Tests that a contracted dimension must have one size in both operands.
func.func @contract_size_mismatch(%a: !mt.tensor<[hidden=8], f32>, %b: !mt.tensor<[hidden=4], f32>) {
  // expected-error @+1 {{'mt.contract' op dimension 'hidden' has size 8 in the lhs but 4 in the rhs}}
  %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that a reduction's dimensions must exist.
func.func @reduce_missing(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.reduce_sum' op operand [seq=4, hidden=8] has no dimension 'batch'}}
  %0 = mt.reduce_sum %a over [batch] : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
  return
}

// -----

// Tests that a dimension is reduced once.
func.func @reduce_duplicate(%a: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.reduce_max' op dimension 'seq' is listed twice}}
  %0 = mt.reduce_max %a over [seq, seq] : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a reduction's result keeps the other dimensions in order.
func.func @reduce_wrong_result(%a: !mt.tensor<[batch=2, seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.reduce_sum' op result type '!mt.tensor<[hidden=8, batch=2], f32>' does not match the expected '!mt.tensor<[batch=2, hidden=8], f32>'}}
  %0 = mt.reduce_sum %a over [seq] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[hidden=8, batch=2], f32>
  return
}

// -----

// Tests that reductions need floating-point operands.
func.func @reduce_integer(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.reduce_sum' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.reduce_sum %a over [seq] : !mt.tensor<[seq=4], i32> -> !mt.tensor<[], i32>
  return
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

// -----

// Tests that softmax's dimension must exist.
func.func @softmax_missing(%a: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.softmax' op operand [seq=4] has no dimension 'kv_seq'}}
  %0 = mt.softmax %a over kv_seq : !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that softmax needs a floating-point operand.
func.func @softmax_integer(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.softmax' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.softmax %a over seq : !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that layer_norm's scale has exactly the normalised dimension.
func.func @layer_norm_scale_dims(%x: !mt.tensor<[batch=2, hidden=8], f32>, %g: !mt.tensor<[batch=2, hidden=8], f32>) {
  // expected-error @+1 {{'mt.layer_norm' op scale type '!mt.tensor<[batch=2, hidden=8], f32>' does not match the expected '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.layer_norm %x, %g over hidden : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  return
}

// -----

// Tests that layer_norm's bias has the input's element type.
func.func @layer_norm_bias_element(%x: !mt.tensor<[hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>, %b: !mt.tensor<[hidden=8], bf16>) {
  // expected-error @+1 {{'mt.layer_norm' op bias type '!mt.tensor<[hidden=8], bf16>' does not match the expected '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.layer_norm %x, %g, %b over hidden : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that layer_norm's epsilon must be positive.
func.func @layer_norm_epsilon(%x: !mt.tensor<[hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.layer_norm' op epsilon must be positive}}
  %0 = mt.layer_norm %x, %g over hidden {epsilon = 0.0 : f64} : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that layer_norm's dimension must exist.
func.func @layer_norm_missing(%x: !mt.tensor<[hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.layer_norm' op operand [hidden=8] has no dimension 'model'}}
  %0 = mt.layer_norm %x, %g over model : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that layer_norm's result has the input's type.
func.func @layer_norm_result(%x: !mt.tensor<[seq=4, hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.layer_norm' op result type '!mt.tensor<[hidden=8, seq=4], f32>' does not match the expected '!mt.tensor<[seq=4, hidden=8], f32>'}}
  %0 = mt.layer_norm %x, %g over hidden : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8, seq=4], f32>
  return
}

// -----

// Tests that rms_norm's scale has the size of the normalised dimension.
func.func @rms_norm_scale_size(%x: !mt.tensor<[hidden=8], f32>, %g: !mt.tensor<[hidden=4], f32>) {
  // expected-error @+1 {{'mt.rms_norm' op scale type '!mt.tensor<[hidden=4], f32>' does not match the expected '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.rms_norm %x, %g over hidden : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that rms_norm's epsilon must be positive.
func.func @rms_norm_epsilon(%x: !mt.tensor<[hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.rms_norm' op epsilon must be positive}}
  %0 = mt.rms_norm %x, %g over hidden {epsilon = -1.0e-6 : f64} : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that rms_norm needs a floating-point input.
func.func @rms_norm_integer(%x: !mt.tensor<[hidden=8], i32>, %g: !mt.tensor<[hidden=8], i32>) {
  // expected-error @+1 {{'mt.rms_norm' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.rms_norm %x, %g over hidden : !mt.tensor<[hidden=8], i32>, !mt.tensor<[hidden=8], i32> -> !mt.tensor<[hidden=8], i32>
  return
}

// -----

// Tests that rope rotates pairs, so its dimension has an even size.
func.func @rope_odd(%x: !mt.tensor<[seq=4, head_dim=7], f32>) {
  // expected-error @+1 {{'mt.rope' op rotated dimension 'head_dim' must have an even size, got 7}}
  %0 = mt.rope %x over head_dim position seq : !mt.tensor<[seq=4, head_dim=7], f32>
  return
}

// -----

// Tests that rope's rotated and position dimensions differ.
func.func @rope_same_dim(%x: !mt.tensor<[seq=4, head_dim=8], f32>) {
  // expected-error @+1 {{'mt.rope' op rotated dimension and position dimension must differ}}
  %0 = mt.rope %x over head_dim position head_dim : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's position ids must be integers.
func.func @rope_float_ids(%x: !mt.tensor<[seq=4, head_dim=8], f32>, %ids: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.rope' op position ids must be integers, got 'f32'}}
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[seq=4], f32> : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's position ids run over the position dimension.
func.func @rope_ids_without_position(%x: !mt.tensor<[batch=2, seq=4, head_dim=8], f32>, %ids: !mt.tensor<[batch=2], i32>) {
  // expected-error @+1 {{'mt.rope' op position ids [batch=2] must have the position dimension 'seq'}}
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[batch=2], i32> : !mt.tensor<[batch=2, seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's position ids do not run over the rotated dimension.
func.func @rope_ids_rotated(%x: !mt.tensor<[seq=4, head_dim=8], f32>, %ids: !mt.tensor<[seq=4, head_dim=8], i32>) {
  // expected-error @+1 {{'mt.rope' op position ids [seq=4, head_dim=8] cannot have the rotated dimension 'head_dim'}}
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[seq=4, head_dim=8], i32> : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's position ids have only the operand's dimensions, of its sizes.
func.func @rope_ids_other_dims(%x: !mt.tensor<[seq=4, head_dim=8], f32>, %ids: !mt.tensor<[batch=2, seq=4], i32>) {
  // expected-error @+1 {{'mt.rope' op position ids [batch=2, seq=4] must have dimensions of the operand [seq=4, head_dim=8]}}
  %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=4], i32> : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's position dimension must exist.
func.func @rope_missing_position(%x: !mt.tensor<[seq=4, head_dim=8], f32>) {
  // expected-error @+1 {{'mt.rope' op operand [seq=4, head_dim=8] has no dimension 'pos'}}
  %0 = mt.rope %x over head_dim position pos : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

// -----

// Tests that rope's theta must be positive.
func.func @rope_theta(%x: !mt.tensor<[seq=4, head_dim=8], f32>) {
  // expected-error @+1 {{'mt.rope' op theta must be positive}}
  %0 = mt.rope %x over head_dim position seq {theta = 0.0 : f64} : !mt.tensor<[seq=4, head_dim=8], f32>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

// Tests that the query must have the named head dimension.
func.func @attention_query_missing(%q: !mt.tensor<[seq=4, heads=2, hd=4], f32>) {
  // expected-error @+1 {{'mt.attention' op query [seq=4, heads=2, hd=4] has no dimension 'head_dim'}}
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, hd=4], f32>, !mt.tensor<[seq=4, heads=2, hd=4], f32>, !mt.tensor<[seq=4, heads=2, hd=4], f32>
  return
}

// -----

// Tests that key and value have the same type.
func.func @attention_k_v(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %v: !mt.tensor<[seq=6, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key '!mt.tensor<[seq=4, heads=2, head_dim=4], f32>' and value '!mt.tensor<[seq=6, heads=2, head_dim=4], f32>' must have the same type}}
  %0 = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that key and query share an element type.
func.func @attention_element(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=2, head_dim=4], bf16>) {
  // expected-error @+1 {{'mt.attention' op key element type 'bf16' differs from the query's 'f32'}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], bf16>, !mt.tensor<[seq=4, heads=2, head_dim=4], bf16>
  return
}

// -----

// Tests that document positions need causal attention.
func.func @attention_positions_not_causal(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.attention' op document positions need causal attention (a key j is visible to query i iff j <= i and i - j <= positions[i])}}
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that document positions must be integers.
func.func @attention_positions_float(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.attention' op expects integer positions}}
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that document positions need the sequence dimension.
func.func @attention_positions_no_seq(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[batch=2], i32>) {
  // expected-error @+1 {{'mt.attention' op positions [batch=2] has no dimension 'seq'}}
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2], i32>
  return
}

// -----

// Tests that document positions are shared by the heads.
func.func @attention_positions_heads(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[seq=4, heads=2], i32>) {
  // expected-error @+1 {{'mt.attention' op positions [seq=4, heads=2] have the head dimension 'heads': one id per query position is shared by every head}}
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2], i32>
  return
}

// -----

// Tests that document positions have the query's dimensions and sizes.
func.func @attention_positions_size(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %ids: !mt.tensor<[seq=3], i32>) {
  // expected-error @+1 {{'mt.attention' op positions [seq=3] must have dimensions of the query [seq=4, heads=2, head_dim=4]}}
  %0 = mt.attention %q, %q, %q positions %ids dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=3], i32>
  return
}

// -----

// Tests that attention needs a floating-point query.
func.func @attention_integer(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], i32>) {
  // expected-error @+1 {{'mt.attention' op expects floating-point query, got element type 'i32'}}
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], i32>, !mt.tensor<[seq=4, heads=2, head_dim=4], i32>, !mt.tensor<[seq=4, heads=2, head_dim=4], i32>
  return
}

// -----

// Tests that the key must have the key/value heads dimension.
func.func @attention_key_missing_kv_heads(%q: !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key [seq=4, heads=2, head_dim=4] has no dimension 'kv_heads'}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that a grouped-query key has kv_heads instead of heads, not both.
func.func @attention_key_both_heads(%q: !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=4, kv_heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key has both 'heads' and 'kv_heads'}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, heads=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=4, kv_heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that the query heads are a multiple of the key/value heads.
func.func @attention_heads_multiple(%q: !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[seq=4, kv_heads=3, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op query heads (4) must be a multiple of key/value heads (3)}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=3, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=3, head_dim=4], f32>
  return
}

// -----

// Tests that with one heads name for query and key, the head counts agree (a name has one
// size); grouped-query attention needs a separate kv_heads dimension.
func.func @attention_same_name_heads(%q: !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op dimension 'heads' has size 4 in the query but 2 in the key}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that causal attention needs equal query and key lengths.
func.func @attention_causal_lengths(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=6, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op causal attention needs equal query and key lengths, got 4 and 6}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that the key has every batch dimension of the query.
func.func @attention_key_lacks_batch(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key [seq=4, heads=2, head_dim=4] lacks the query dimension 'batch'}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that a batch dimension has one size in query and key.
func.func @attention_batch_size(%q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[batch=3, seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op dimension 'batch' has size 2 in the query but 3 in the key}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=3, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=3, seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that the key has no dimension the query lacks.
func.func @attention_key_extra(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key [batch=2, seq=4, heads=2, head_dim=4] has dimensions that the query [seq=4, heads=2, head_dim=4] lacks}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that the sequence, heads and head dimensions are three different dimensions.
func.func @attention_same_names(%q: !mt.tensor<[seq=4, heads=2], f32>) {
  // expected-error @+1 {{'mt.attention' op sequence, heads and head dimensions must be three different dimensions, got (seq, heads, seq)}}
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, seq) scale 0.5 : !mt.tensor<[seq=4, heads=2], f32>, !mt.tensor<[seq=4, heads=2], f32>, !mt.tensor<[seq=4, heads=2], f32>
  return
}

// -----

// Tests that the key/value heads dimension is not another query dimension.
func.func @attention_kv_heads_is_batch(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[batch=2, seq=4, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op key/value heads dimension 'batch' must be 'heads' or a dimension the query lacks, but the query [batch=2, seq=4, heads=4, head_dim=4] has it}}
  %0 = mt.attention %q, %k, %k dims(seq, heads, batch, head_dim) scale 0.5 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, head_dim=4], f32>, !mt.tensor<[batch=2, seq=4, head_dim=4], f32>
  return
}

// -----

// Tests that the attention scale must be positive.
func.func @attention_scale(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op scale must be positive}}
  %0 = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) scale -0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention's result has the query's type (generic form, where it is written).
func.func @attention_result(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op result type '!mt.tensor<[seq=4, heads=2, head_dim=4], bf16>' does not match the expected '!mt.tensor<[seq=4, heads=2, head_dim=4], f32>'}}
  %0 = "mt.attention"(%q, %q, %q) <{seq_dim = "seq", heads_dim = "heads", kv_heads_dim = "heads", head_dim = "head_dim", scale = 0.5 : f64}> : (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> !mt.tensor<[seq=4, heads=2, head_dim=4], bf16>
  return
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

// -----

// Tests that attention has a log-sum-exp result exactly when it has save_lse (generic
// form, where the results are written).
func.func @attention_lse_without_save(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op has a log-sum-exp result exactly when it has 'save_lse'}}
  %0:2 = "mt.attention"(%q, %q, %q) <{seq_dim = "seq", heads_dim = "heads", kv_heads_dim = "heads", head_dim = "head_dim", scale = 0.5 : f64}> : (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2], f32>)
  return
}

// -----

// Tests that attention's log-sum-exp has the query's type without head_dim.
func.func @attention_lse_type(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention' op log-sum-exp type '!mt.tensor<[seq=4, heads=2, head_dim=4], f32>' does not match the expected '!mt.tensor<[seq=4, heads=2], f32>'}}
  %0:2 = "mt.attention"(%q, %q, %q) <{seq_dim = "seq", heads_dim = "heads", kv_heads_dim = "heads", head_dim = "head_dim", scale = 0.5 : f64, save_lse}> : (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) -> (!mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>)
  return
}

// -----

// Tests that attention_grad's saved values are the forward's output and log-sum-exp: two.
func.func @attention_grad_saved_count(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op saves the forward's output and log-sum-exp (2 values), got 1}}
  %0:3 = mt.attention_grad %q, %q, %q, %q saved(%q : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention_grad's saved log-sum-exp has one value per query row and head.
func.func @attention_grad_saved_lse(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op saved log-sum-exp must have type '!mt.tensor<[seq=4, heads=2], f32>', got '!mt.tensor<[seq=4, heads=2, head_dim=4], f32>'}}
  %0:3 = mt.attention_grad %q, %q, %q, %q saved(%q, %q : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>) dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that gather's ids are integers.
func.func @gather_float_ids(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.gather' op expects integer indices, got element type 'f32'}}
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4, hidden=8], f32>
  return
}

// -----

// Tests that gather's ids are not booleans.
func.func @gather_bool_ids(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[seq=4], i1>) {
  // expected-error @+1 {{'mt.gather' op expects integer indices, got element type 'i1'}}
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[seq=4], i1> -> !mt.tensor<[seq=4, hidden=8], f32>
  return
}

// -----

// Tests that gather's table is floating-point.
func.func @gather_integer_table(%w: !mt.tensor<[vocab=16, hidden=8], i32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.gather' op expects floating-point table, got element type 'i32'}}
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], i32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[seq=4, hidden=8], i32>
  return
}

// -----

// Tests that the gathered dimension must be a table dimension.
func.func @gather_missing_dim(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.gather' op table [vocab=16, hidden=8] has no dimension 'tokens'}}
  %0 = mt.gather %w, %t over tokens : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[seq=4, hidden=8], f32>
  return
}

// -----

// Tests that the table's kept dimensions and the ids' dimensions are disjoint.
func.func @gather_shared_dim(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[hidden=8], i32>) {
  // expected-error @+1 {{'mt.gather' op dimension 'hidden' is in both the table and the indices}}
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[hidden=8], i32> -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that gather's result has the ids' dimensions, then the table's.
func.func @gather_result(%w: !mt.tensor<[vocab=16, hidden=8], f32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.gather' op result type '!mt.tensor<[hidden=8, seq=4], f32>' does not match the expected '!mt.tensor<[seq=4, hidden=8], f32>'}}
  %0 = mt.gather %w, %t over vocab : !mt.tensor<[vocab=16, hidden=8], f32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[hidden=8, seq=4], f32>
  return
}

// -----

// Tests that cross_entropy's labels have the logits' dimensions without the class one.
func.func @cross_entropy_labels(%l: !mt.tensor<[batch=2, seq=4, vocab=16], f32>, %t: !mt.tensor<[batch=2], i32>) {
  // expected-error @+1 {{'mt.cross_entropy' op labels [batch=2] must have the logits' dimensions without 'vocab', i.e. [batch=2, seq=4]}}
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[batch=2, seq=4, vocab=16], f32>, !mt.tensor<[batch=2], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's labels match the logits in size.
func.func @cross_entropy_label_size(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=8], i32>) {
  // expected-error @+1 {{labels [seq=8] must have the logits' dimensions without 'vocab', i.e. [seq=4]}}
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=8], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's mask has the labels' dimensions, in their order.
func.func @cross_entropy_mask_dims(%l: !mt.tensor<[seq=4, batch=2, vocab=16], f32>, %t: !mt.tensor<[seq=4, batch=2], i32>, %m: !mt.tensor<[batch=2, seq=4], f32>) {
  // expected-error @+1 {{'mt.cross_entropy' op mask [batch=2, seq=4] must have the labels' dimensions [seq=4, batch=2]}}
  %0 = mt.cross_entropy %l, %t mask %m over vocab : !mt.tensor<[seq=4, batch=2, vocab=16], f32>, !mt.tensor<[seq=4, batch=2], i32>, !mt.tensor<[batch=2, seq=4], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's mask is floating-point.
func.func @cross_entropy_integer_mask(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.cross_entropy' op expects floating-point mask, got element type 'i32'}}
  %0 = mt.cross_entropy %l, %t mask %t over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's labels are integers.
func.func @cross_entropy_float_labels(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.cross_entropy' op expects integer labels, got element type 'f32'}}
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's logits are floating-point.
func.func @cross_entropy_integer_logits(%l: !mt.tensor<[seq=4, vocab=16], i32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.cross_entropy' op expects floating-point logits, got element type 'i32'}}
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[seq=4, vocab=16], i32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy's class dimension must exist.
func.func @cross_entropy_missing(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.cross_entropy' op logits [seq=4, vocab=16] has no dimension 'classes'}}
  %0 = mt.cross_entropy %l, %t over classes : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that cross_entropy produces a scalar.
func.func @cross_entropy_result(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.cross_entropy' op result must be a floating-point scalar, got '!mt.tensor<[seq=4], f32>'}}
  %0 = mt.cross_entropy %l, %t over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that a dropout rate of 1 (drop everything) is rejected.
func.func @dropout_rate_one(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.dropout' op rate must be in [0, 1), got 1.000000e+00}}
  %0 = mt.dropout %x rate 1.0 stream 0 : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a negative dropout rate is rejected.
func.func @dropout_rate_negative(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.dropout' op rate must be in [0, 1), got -1.000000e-01}}
  %0 = mt.dropout %x rate -0.1 stream 0 : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that dropout needs a floating-point input.
func.func @dropout_integer(%x: !mt.tensor<[hidden=8], i32>) {
  // expected-error @+1 {{'mt.dropout' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.dropout %x rate 0.1 stream 0 : !mt.tensor<[hidden=8], i32>
  return
}

//===----------------------------------------------------------------------===//
// Dimension manipulation
//===----------------------------------------------------------------------===//

// -----

// Tests that the new dimensions' sizes multiply to the split dimension's size.
func.func @split_product(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.split' op sizes of the new dimensions multiply to 6, not to the size 8 of 'hidden'}}
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=3], f32>
  return
}

// -----

// Tests that a split produces at least two dimensions.
func.func @split_into_one(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.split' op must split into at least two dimensions}}
  %0 = mt.split %x hidden into [model] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[model=8], f32>
  return
}

// -----

// Tests that a split's new dimensions are new.
func.func @split_existing(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.split' op new dimension 'seq' already exists in the operand [seq=4, hidden=8]}}
  %0 = mt.split %x hidden into [seq, head_dim] : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=2, head_dim=4], f32>
  return
}

// -----

// Tests that a split's new dimensions are listed once.
func.func @split_twice(%x: !mt.tensor<[hidden=16], f32>) {
  // expected-error @+1 {{'mt.split' op dimension 'a' is listed twice}}
  %0 = mt.split %x hidden into [a, a] : !mt.tensor<[hidden=16], f32> -> !mt.tensor<[a=4], f32>
  return
}

// -----

// Tests that the result has every new dimension (it gives their sizes).
func.func @split_result_lacks(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.split' op result [heads=2] lacks the new dimension 'head_dim'}}
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[heads=2], f32>
  return
}

// -----

// Tests that the split dimension must exist.
func.func @split_missing(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.split' op operand [hidden=8] has no dimension 'model'}}
  %0 = mt.split %x model into [heads, head_dim] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that the new dimensions take the split dimension's place, in order.
func.func @split_order(%x: !mt.tensor<[hidden=8, seq=4], f32>) {
  // expected-error @+1 {{'mt.split' op result type '!mt.tensor<[seq=4, heads=2, head_dim=4], f32>' does not match the expected '!mt.tensor<[heads=2, head_dim=4, seq=4], f32>'}}
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[hidden=8, seq=4], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that a merge combines at least two dimensions.
func.func @merge_one(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.merge' op must merge at least two dimensions}}
  %0 = mt.merge %x [hidden] into model : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, model=8], f32>
  return
}

// -----

// Tests that merged dimensions must exist.
func.func @merge_missing(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.merge' op operand [seq=4, hidden=8] has no dimension 'heads'}}
  %0 = mt.merge %x [heads, hidden] into model : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, model=8], f32>
  return
}

// -----

// Tests that merged dimensions are listed once.
func.func @merge_twice(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.merge' op dimension 'hidden' is listed twice}}
  %0 = mt.merge %x [hidden, hidden] into model : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[seq=4, model=64], f32>
  return
}

// -----

// Tests that a merge cannot produce a dimension that already exists elsewhere.
func.func @merge_onto_existing(%x: !mt.tensor<[batch=2, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.merge' op new dimension 'batch' already exists in the operand [batch=2, heads=2, head_dim=4]}}
  %0 = mt.merge %x [heads, head_dim] into batch : !mt.tensor<[batch=2, heads=2, head_dim=4], f32> -> !mt.tensor<[batch=8], f32>
  return
}

// -----

// Tests that the merged size is the product of the merged sizes.
func.func @merge_size(%x: !mt.tensor<[heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.merge' op result type '!mt.tensor<[hidden=6], f32>' does not match the expected '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.merge %x [heads, head_dim] into hidden : !mt.tensor<[heads=2, head_dim=4], f32> -> !mt.tensor<[hidden=6], f32>
  return
}

// -----

// Tests that rename cannot create a duplicate dimension.
func.func @rename_onto_existing(%x: !mt.tensor<[seq=4, kv_seq=4], f32>) {
  // expected-error @+1 {{'mt.rename' op new dimension 'kv_seq' already exists in the operand [seq=4, kv_seq=4]}}
  %0 = mt.rename %x seq to kv_seq : !mt.tensor<[seq=4, kv_seq=4], f32> -> !mt.tensor<[kv_seq=4, kv_seq2=4], f32>
  return
}

// -----

// Tests that the renamed dimension must exist.
func.func @rename_missing(%x: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.rename' op operand [seq=4] has no dimension 'hidden'}}
  %0 = mt.rename %x hidden to model : !mt.tensor<[seq=4], f32> -> !mt.tensor<[model=4], f32>
  return
}

// -----

// Tests that rename keeps the dimension's place and size.
func.func @rename_result(%x: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.rename' op result type '!mt.tensor<[hidden=8, kv_seq=4], f32>' does not match the expected '!mt.tensor<[kv_seq=4, hidden=8], f32>'}}
  %0 = mt.rename %x seq to kv_seq : !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[hidden=8, kv_seq=4], f32>
  return
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

// -----

// Tests that topk's k cannot exceed the dimension it selects from.
func.func @topk_too_large(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op k = 5 exceeds the size 4 of 'expert'}}
  %v, %i = mt.topk %x over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, k=5], f32>, !mt.tensor<[tokens=8, k=5], i32>
  return
}

// -----

// Tests that topk's dimension must exist.
func.func @topk_missing(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op operand [tokens=8, expert=4] has no dimension 'experts'}}
  %v, %i = mt.topk %x over experts k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], i32>
  return
}

// -----

// Tests that topk's values carry the k dimension (it gives k).
func.func @topk_values_lack_k(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op values [tokens=8, expert=4] lack the dimension 'k'}}
  %v, %i = mt.topk %x over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32>
  return
}

// -----

// Tests that topk's indices are integers.
func.func @topk_float_indices(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op expects integer indices, got element type 'f32'}}
  %v, %i = mt.topk %x over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that topk's k dimension is new.
func.func @topk_k_exists(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op new dimension 'tokens' already exists in the operand [tokens=8, expert=4]}}
  %v, %i = mt.topk %x over expert k tokens : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=2], f32>, !mt.tensor<[tokens=2], i32>
  return
}

// -----

// Tests that topk's values keep the input's element type and dimension order.
func.func @topk_values_type(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op values type '!mt.tensor<[k=2, tokens=8], f32>' does not match the expected '!mt.tensor<[tokens=8, k=2], f32>'}}
  %v, %i = mt.topk %x over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[k=2, tokens=8], f32>, !mt.tensor<[tokens=8, k=2], i32>
  return
}

// -----

// Tests that topk's indices have the values' dimensions.
func.func @topk_indices_type(%x: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.topk' op indices type '!mt.tensor<[tokens=8, k=3], i32>' does not match the expected '!mt.tensor<[tokens=8, k=2], i32>'}}
  %v, %i = mt.topk %x over expert k k : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=3], i32>
  return
}

// -----

// Tests that expert_load's indices are integers.
func.func @expert_load_float_indices(%i: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.expert_load' op expects integer indices, got element type 'f32'}}
  %0 = mt.expert_load %i k k to expert : !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[expert=4], i64>
  return
}

// -----

// Tests that expert_load's indices have the k dimension.
func.func @expert_load_indices_lack_k(%i: !mt.tensor<[tokens=8], i32>) {
  // expected-error @+1 {{'mt.expert_load' op indices [tokens=8] has no dimension 'k'}}
  %0 = mt.expert_load %i k k to expert : !mt.tensor<[tokens=8], i32> -> !mt.tensor<[expert=4], i64>
  return
}

// -----

// Tests that expert_load's expert dimension is not one of the indices'.
func.func @expert_load_expert_in_indices(%i: !mt.tensor<[expert=8, k=2], i32>) {
  // expected-error @+1 {{'mt.expert_load' op new dimension 'expert' already exists in the indices [expert=8, k=2]}}
  %0 = mt.expert_load %i k k to expert : !mt.tensor<[expert=8, k=2], i32> -> !mt.tensor<[expert=4], i64>
  return
}

// -----

// Tests that expert_load counts in integers.
func.func @expert_load_float_result(%i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.expert_load' op expects integer result, got element type 'f32'}}
  %0 = mt.expert_load %i k k to expert : !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4], f32>
  return
}

// -----

// Tests that expert_load's result has the expert dimension and nothing else.
func.func @expert_load_result_dims(%i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.expert_load' op result [layers=2, expert=4] must have the expert dimension 'expert' alone}}
  %0 = mt.expert_load %i k k to expert : !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[layers=2, expert=4], i64>
  return
}

// -----

// Tests that dispatch's capacity is ceil(factor * tokens * k / experts) = ceil(1.25 * 8 * 2 / 4) = 5.
func.func @dispatch_capacity(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op result type '!mt.tensor<[expert=4, cap=4, hidden=4], f32>' does not match the expected '!mt.tensor<[expert=4, cap=5, hidden=4], f32>'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.25 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that a dropless dispatch's capacity is the token count (8), not the exact fit
// tokens * k / experts (4).
func.func @dispatch_dropless_capacity(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op result type '!mt.tensor<[expert=4, cap=4, hidden=4], f32>' does not match the expected '!mt.tensor<[expert=4, cap=8, hidden=4], f32>'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap dropless : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that dispatch's indices are integers.
func.func @dispatch_float_indices(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.dispatch' op expects integer indices, got element type 'f32'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that dispatch's indices have the k dimension.
func.func @dispatch_indices_lack_k(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8], i32>) {
  // expected-error @+1 {{'mt.dispatch' op indices [tokens=8] has no dimension 'k'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8], i32> -> !mt.tensor<[expert=4, cap=2, hidden=4], f32>
  return
}

// -----

// Tests that dispatch's expert dimension is new.
func.func @dispatch_expert_exists(%x: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op new dimension 'expert' already exists in the input [tokens=8, expert=4]}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4], f32>
  return
}

// -----

// Tests that dispatch's capacity dimension is new.
func.func @dispatch_capacity_exists(%x: !mt.tensor<[tokens=8, cap=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op new dimension 'cap' already exists in the input [tokens=8, cap=4]}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=8, cap=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4], f32>
  return
}

// -----

// Tests that dispatch's expert and capacity dimensions are two dimensions.
func.func @dispatch_same_dims(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op expert and capacity dimensions must differ, got 'e' for both}}
  %0 = mt.dispatch %x, %i k k to e capacity e factor 1.0 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[e=4, hidden=4], f32>
  return
}

// -----

// Tests that dispatch's capacity factor must be positive.
func.func @dispatch_factor(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op capacity factor must be positive and finite, got 0.000000e+00}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 0.0 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that a capacity factor too large to give a representable capacity is rejected.
func.func @dispatch_factor_huge(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op capacity factor 1.000000e+300 gives a capacity too large to represent}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0e300 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that a token dimension has one size in input and indices.
func.func @dispatch_token_size(%x: !mt.tensor<[tokens=6, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op token dimension 'tokens' has size 6 in the input but 8 in the indices}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=6, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[expert=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that the input has every token dimension of the indices.
func.func @dispatch_input_lacks_token(%x: !mt.tensor<[seq=8, hidden=4], f32>, %i: !mt.tensor<[batch=2, seq=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op input [seq=8, hidden=4] lacks the token dimension 'batch'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[seq=8, hidden=4], f32>, !mt.tensor<[batch=2, seq=8, k=2], i32> -> !mt.tensor<[expert=4, cap=8, hidden=4], f32>
  return
}

// -----

// Tests that the result has the expert dimension (it gives the expert count).
func.func @dispatch_result_lacks_expert(%x: !mt.tensor<[tokens=8, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.dispatch' op result [experts=4, cap=4, hidden=4] lacks the expert dimension 'expert'}}
  %0 = mt.dispatch %x, %i k k to expert capacity cap factor 1.0 : !mt.tensor<[tokens=8, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[experts=4, cap=4, hidden=4], f32>
  return
}

// -----

// Tests that combine's weights have the indices' dimensions.
func.func @combine_weights(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=1], f32>) {
  // expected-error @+1 {{'mt.combine' op weights [tokens=8, k=1] must have the dimensions of the indices [tokens=8, k=2]}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=1], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's weights have the input's element type.
func.func @combine_weights_element(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], bf16>) {
  // expected-error @+1 {{'mt.combine' op weights element type 'bf16' differs from the input's 'f32'}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], bf16> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's weights are floating-point.
func.func @combine_integer_weights(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.combine' op expects floating-point weights, got element type 'i32'}}
  %0 = mt.combine %x, %i, %i k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's input has the expert dimension.
func.func @combine_input_lacks_expert(%x: !mt.tensor<[e=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.combine' op input [e=4, cap=5, hidden=4] has no dimension 'expert'}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[e=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's indices have the k dimension.
func.func @combine_indices_lack_k(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, top=2], i32>, %w: !mt.tensor<[tokens=8, top=2], f32>) {
  // expected-error @+1 {{'mt.combine' op indices [tokens=8, top=2] has no dimension 'k'}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, top=2], i32>, !mt.tensor<[tokens=8, top=2], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's indices are integers.
func.func @combine_float_indices(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %w: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.combine' op expects integer indices, got element type 'f32'}}
  %0 = mt.combine %x, %w, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's feature dimensions are not routing dimensions.
func.func @combine_feature_in_indices(%x: !mt.tensor<[expert=4, cap=5, tokens=8], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.combine' op feature dimension 'tokens' of the input is also a dimension of the indices}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, tokens=8], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8], f32>
  return
}

// -----

// Tests that combine's expert and capacity dimensions are two dimensions.
func.func @combine_same_dims(%x: !mt.tensor<[e=4, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.combine' op expert and capacity dimensions must differ, got 'e' for both}}
  %0 = mt.combine %x, %i, %w k k from e capacity e : !mt.tensor<[e=4, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8, hidden=4], f32>
  return
}

// -----

// Tests that combine's result is the token dimensions then the features.
func.func @combine_result(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.combine' op result type '!mt.tensor<[hidden=4, tokens=8], f32>' does not match the expected '!mt.tensor<[tokens=8, hidden=4], f32>'}}
  %0 = mt.combine %x, %i, %w k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[hidden=4, tokens=8], f32>
  return
}

// -----

// Tests that the balancing loss's logits and indices route the same tokens.
func.func @lbl_tokens(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=6, k=2], i32>) {
  // expected-error @+1 {{'mt.load_balancing_loss' op logits [tokens=8, expert=4] and indices [tokens=6, k=2] must route the same tokens}}
  %0 = mt.load_balancing_loss %l, %i over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=6, k=2], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the balancing loss is a scalar of the logits' element type.
func.func @lbl_result(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.load_balancing_loss' op result type '!mt.tensor<[], bf16>' does not match the expected '!mt.tensor<[], f32>'}}
  %0 = mt.load_balancing_loss %l, %i over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[], bf16>
  return
}

// -----

// Tests that the balancing loss's logits have the expert dimension.
func.func @lbl_missing_expert(%l: !mt.tensor<[tokens=8, e=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.load_balancing_loss' op logits [tokens=8, e=4] has no dimension 'expert'}}
  %0 = mt.load_balancing_loss %l, %i over expert k k : !mt.tensor<[tokens=8, e=4], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the balancing loss's indices are integers.
func.func @lbl_float_indices(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss' op expects integer indices, got element type 'f32'}}
  %0 = mt.load_balancing_loss %l, %i over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the balancing loss's indices have the k dimension.
func.func @lbl_indices_lack_k(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8], i32>) {
  // expected-error @+1 {{'mt.load_balancing_loss' op indices [tokens=8] has no dimension 'k'}}
  %0 = mt.load_balancing_loss %l, %i over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the z-loss's logits have the dimension it reduces.
func.func @z_loss_missing_dim(%l: !mt.tensor<[tokens=8, e=4], f32>) {
  // expected-error @+1 {{'mt.z_loss' op logits [tokens=8, e=4] has no dimension 'expert'}}
  %0 = mt.z_loss %l over expert : !mt.tensor<[tokens=8, e=4], f32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the z-loss takes floating-point logits.
func.func @z_loss_integer_logits(%l: !mt.tensor<[tokens=8, expert=4], i32>) {
  // expected-error @+1 {{'mt.z_loss' op expects floating-point logits, got element type 'i32'}}
  %0 = mt.z_loss %l over expert : !mt.tensor<[tokens=8, expert=4], i32> -> !mt.tensor<[], f32>
  return
}

// -----

// Tests that the z-loss is a scalar of the logits' element type.
func.func @z_loss_result_type(%l: !mt.tensor<[tokens=8, expert=4], f32>) {
  // expected-error @+1 {{'mt.z_loss' op result type '!mt.tensor<[tokens=8], f32>' does not match the expected '!mt.tensor<[], f32>'}}
  %0 = mt.z_loss %l over expert : !mt.tensor<[tokens=8, expert=4], f32> -> !mt.tensor<[tokens=8], f32>
  return
}

//===----------------------------------------------------------------------===//
// mt.repeat
//===----------------------------------------------------------------------===//

// -----

// Tests that repeat only calls functions marked `mt.layer`.
func.func @plain(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_non_layer(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op 'plain' is not a layer (a func.func marked 'mt.layer' or 'mt.layer_of')}}
  %0 = mt.repeat @plain(%x) count 2 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that repeat's invariant operands are among its operands.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_too_many_invariant(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op passes 2 invariant operands but has only 1 operands}}
  %0 = mt.repeat @layer(%x) count 2 {invariant = 2 : i64} : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that without 'carried' the operands but the invariant ones are carried.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_invariant_results(%x: !mt.tensor<[hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.repeat' op without 'carried' every operand besides the invariant ones is carried, so the op needs as many results as operands besides the invariant ones}}
  %0:2 = mt.repeat @layer(%x, %ids) count 2 {invariant = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[seq=4], i32>)
  return
}

// -----

// Tests that an invariant operand reaches the layer whole (not sliced along the stack).
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %ids: !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_invariant_type(%x: !mt.tensor<[hidden=8], f32>, %ids: !mt.tensor<[layers=2, seq=4], i32>) {
  // expected-error @+1 {{'mt.repeat' op operand and result types do not match layer 'layer' of type '(!mt.tensor<[hidden=8], f32>, !mt.tensor<[seq=4], i32>) -> !mt.tensor<[hidden=8], f32>'}}
  %0 = mt.repeat @layer(%x, %ids) count 2 {invariant = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=2, seq=4], i32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that repeat's callee must exist.
func.func @repeat_missing(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op 'nothing' does not name a function}}
  %0 = mt.repeat @nothing(%x) count 2 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that repeat's operand types must be the layer's.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_type_mismatch(%x: !mt.tensor<[hidden=4], f32>) {
  // expected-error @+1 {{'mt.repeat' op operand and result types do not match layer 'layer' of type '(!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>'}}
  %0 = mt.repeat @layer(%x) count 2 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
  return
}

// -----

// Tests that a repeated layer returns what it takes, since each repeat feeds the next.
func.func @repeat_result_types(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op carried value #0 must keep its type from call to call, since each call feeds the next}}
  %0 = mt.repeat @layer(%x) count 2 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], bf16>
  return
}

// -----

// Tests that repeat's count is positive.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_zero(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op attribute 'count' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = mt.repeat @layer(%x) count 0 : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

//===----------------------------------------------------------------------===//
// mt.state, mt.assign and stacked layer parameters
//===----------------------------------------------------------------------===//

// -----

// Tests that a state belongs to an existing parameter.
// expected-error @+1 {{'mt.state' op 'nothing' does not name an mt.param}}
mt.state @m of @nothing : !mt.tensor<[hidden=8], f32>

// -----

// Tests that a state belongs to a parameter, not to another state.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
// expected-error @+1 {{'mt.state' op 'w.m' does not name an mt.param}}
mt.state @w.m.m of @w.m : !mt.tensor<[hidden=8], f32>

// -----

// Tests that a state has its parameter's type.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
// expected-error @+1 {{'mt.state' op state 'w.m' of parameter 'w' must have its type '!mt.tensor<[hidden=8], f32>', got '!mt.tensor<[hidden=8], bf16>'}}
mt.state @w.m of @w : !mt.tensor<[hidden=8], bf16>

// -----

// Tests that the state of a layer parameter holds all its instances, stacked along a
// leading `layers` dimension.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
// expected-error @+1 {{'mt.state' op state 'block.g.m' of layer parameter 'block.g' holds all its instances: expected its type '!mt.tensor<[hidden=8], f32>' with a leading 'layers' dimension, got '!mt.tensor<[hidden=8], f32>'}}
mt.state @block.g.m of @block.g : !mt.tensor<[hidden=8], f32>

// -----

// Tests that a stacked state's `layers` dimension comes first.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
// expected-error @+1 {{'mt.state' op state 'block.g.m' of layer parameter 'block.g' holds all its instances: expected its type '!mt.tensor<[hidden=8], f32>' with a leading 'layers' dimension, got '!mt.tensor<[hidden=8, layers=3], f32>'}}
mt.state @block.g.m of @block.g : !mt.tensor<[hidden=8, layers=3], f32>

// -----

// Tests that outside its layer a layer parameter's stacking dimension is `layers`.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @forward() {
  // expected-error @+1 {{'mt.param_ref' op outside layer 'block', parameter 'block.g' is read with all its instances: expected its type '!mt.tensor<[hidden=8], f32>' with a leading 'layers' dimension, got '!mt.tensor<[depth=3, hidden=8], f32>'}}
  %0 = mt.param_ref @block.g : !mt.tensor<[depth=3, hidden=8], f32>
  return
}

// -----

// Tests that outside its layer a layer parameter's `layers` dimension leads.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @forward() {
  // expected-error @+1 {{got '!mt.tensor<[hidden=8, layers=3], f32>'}}
  %0 = mt.param_ref @block.g : !mt.tensor<[hidden=8, layers=3], f32>
  return
}

// -----

// Tests that the stacked instances of a layer parameter have the parameter's type.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @forward() {
  // expected-error @+1 {{got '!mt.tensor<[layers=3, hidden=4], f32>'}}
  %0 = mt.param_ref @block.g : !mt.tensor<[layers=3, hidden=4], f32>
  return
}

// -----

// Tests that assign writes all instances of a layer parameter outside its layer.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @step(%v: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.assign' op outside layer 'block', parameter 'block.g' is read with all its instances: expected its type '!mt.tensor<[hidden=8], f32>' with a leading 'layers' dimension, got '!mt.tensor<[hidden=8], f32>'}}
  mt.assign @block.g, %v : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that assign checks a state's type.
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
func.func @step(%v: !mt.tensor<[hidden=4], f32>) {
  // expected-error @+1 {{'mt.assign' op type '!mt.tensor<[hidden=4], f32>' does not match state 'w.m' of type '!mt.tensor<[hidden=8], f32>'}}
  mt.assign @w.m, %v : !mt.tensor<[hidden=4], f32>
  return
}

// -----

// Tests that assign needs a parameter or a state.
func.func @step(%v: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.assign' op 'nowhere' does not name an mt.param or mt.state}}
  mt.assign @nowhere, %v : !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a function derived from a layer (marked `mt.layer_of`) cannot read another
// layer's parameter.
mt.param @a.g layer @a : !mt.tensor<[hidden=8], f32> init ones
func.func @a(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @b(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @b.bwd(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer_of = @b} {
  // expected-error @+1 {{'mt.param_ref' op parameter 'a.g' belongs to layer 'a' and can only be read inside it}}
  %0 = mt.param_ref @a.g : !mt.tensor<[hidden=8], f32>
  return %x : !mt.tensor<[hidden=8], f32>
}

// -----

// Tests that a function derived from a layer reads the current instance of the layer's
// parameter, not all of them.
mt.param @block.g layer @block : !mt.tensor<[hidden=8], f32> init ones
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @block.bwd(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer_of = @block} {
  // expected-error @+1 {{'mt.param_ref' op type '!mt.tensor<[layers=3, hidden=8], f32>' does not match parameter 'block.g' of type '!mt.tensor<[hidden=8], f32>'}}
  %0 = mt.param_ref @block.g : !mt.tensor<[layers=3, hidden=8], f32>
  return %x : !mt.tensor<[hidden=8], f32>
}

// -----

// Tests that a layer cannot write another layer's parameter.
mt.param @a.g layer @a : !mt.tensor<[hidden=8], f32> init ones
func.func @a(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @b(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  // expected-error @+1 {{'mt.assign' op parameter 'a.g' belongs to layer 'a' and can only be read inside it}}
  mt.assign @a.g, %x : !mt.tensor<[hidden=8], f32>
  return %x : !mt.tensor<[hidden=8], f32>
}

//===----------------------------------------------------------------------===//
// mt.iota
//===----------------------------------------------------------------------===//

// -----

// Tests that iota produces exactly one dimension.
func.func @iota_two_dims() {
  // expected-error @+1 {{'mt.iota' op result must have exactly the one dimension 'seq', got [seq=4, hidden=8]}}
  %0 = mt.iota dim seq : !mt.tensor<[seq=4, hidden=8], f32>
  return
}

// -----

// Tests that iota does not produce a scalar.
func.func @iota_scalar() {
  // expected-error @+1 {{'mt.iota' op result must have exactly the one dimension 'seq', got []}}
  %0 = mt.iota dim seq : !mt.tensor<[], f32>
  return
}

// -----

// Tests that iota's one dimension is the one it names.
func.func @iota_other_dim() {
  // expected-error @+1 {{'mt.iota' op result must have exactly the one dimension 'seq', got [pos=4]}}
  %0 = mt.iota dim seq : !mt.tensor<[pos=4], f32>
  return
}

// -----

// Tests that iota's positions are not booleans.
func.func @iota_bool() {
  // expected-error @+1 {{'mt.iota' op expects integer or floating-point result, got element type 'i1'}}
  %0 = mt.iota dim seq : !mt.tensor<[seq=2], i1>
  return
}

// -----

// Tests that every position must be exact in a floating-point type (bf16: up to 256).
func.func @iota_bf16_inexact() {
  // expected-error @+1 {{'mt.iota' op element type 'bf16' cannot hold every position up to 257 exactly}}
  %0 = mt.iota dim seq : !mt.tensor<[seq=258], bf16>
  return
}

// -----

// Tests that every position must fit a signed integer type (i8: up to 127).
func.func @iota_i8_overflow() {
  // expected-error @+1 {{'mt.iota' op element type 'i8' cannot hold every position up to 128 exactly}}
  %0 = mt.iota dim seq : !mt.tensor<[seq=129], i8>
  return
}

//===----------------------------------------------------------------------===//
// Helpers of the backward pass
//===----------------------------------------------------------------------===//

// -----

// Tests that cos needs a floating-point operand.
func.func @integer_cos(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.cos' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.cos %a : !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that broadcast keeps the element type.
func.func @broadcast_element(%a: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.broadcast' op cannot change the element type}}
  %0 = mt.broadcast %a : !mt.tensor<[hidden=8], f32> to !mt.tensor<[batch=2, hidden=8], bf16>
  return
}

// -----

// Tests that broadcast cannot drop a dimension.
func.func @broadcast_drops(%a: !mt.tensor<[batch=2, hidden=8], f32>) {
  // expected-error @+1 {{'mt.broadcast' op result [batch=2, seq=4] must keep the operand's dimension 'hidden' of size 8}}
  %0 = mt.broadcast %a : !mt.tensor<[batch=2, hidden=8], f32> to !mt.tensor<[batch=2, seq=4], f32>
  return
}

// -----

// Tests that broadcast keeps the operand's sizes.
func.func @broadcast_resizes(%a: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.broadcast' op result [hidden=4, batch=2] must keep the operand's dimension 'hidden' of size 8}}
  %0 = mt.broadcast %a : !mt.tensor<[hidden=8], f32> to !mt.tensor<[hidden=4, batch=2], f32>
  return
}

// -----

// Tests that greater compares floating-point operands.
func.func @integer_greater(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.greater' op expects floating-point operands, got element type 'i32'}}
  %0 = mt.greater %a, %a : !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4], i32> -> !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that greater's operands agree on shared dimensions, as for the other binary ops.
func.func @greater_mismatch(%a: !mt.tensor<[seq=4], f32>, %b: !mt.tensor<[seq=8], f32>) {
  // expected-error @+1 {{'mt.greater' op dimension 'seq' has size 4 in the lhs but 8 in the rhs}}
  %0 = mt.greater %a, %b : !mt.tensor<[seq=4], f32>, !mt.tensor<[seq=8], f32> -> !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that greater's operands share an element type.
func.func @greater_element(%a: !mt.tensor<[seq=4], f32>, %b: !mt.tensor<[seq=4], bf16>) {
  // expected-error @+1 {{'mt.greater' op operands have different element types 'f32' and 'bf16'}}
  %0 = mt.greater %a, %b : !mt.tensor<[seq=4], f32>, !mt.tensor<[seq=4], bf16> -> !mt.tensor<[seq=4], f32>
  return
}

// -----

// Tests that greater's mask is broadcast like the other binary ops' results.
func.func @greater_result(%a: !mt.tensor<[kv=4], f32>, %b: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.greater' op result type '!mt.tensor<[seq=4, kv=4], f32>' does not match the expected '!mt.tensor<[kv=4, seq=4], f32>'}}
  %0 = mt.greater %a, %b : !mt.tensor<[kv=4], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4, kv=4], f32>
  return
}

// -----

// Tests that gelu_grad needs a floating-point operand.
func.func @integer_gelu_grad(%a: !mt.tensor<[seq=4], i32>) {
  // expected-error @+1 {{'mt.gelu_grad' op expects floating-point operand, got element type 'i32'}}
  %0 = mt.gelu_grad %a approximate : !mt.tensor<[seq=4], i32>
  return
}

// -----

// Tests that gelu_grad keeps its operand's type.
func.func @gelu_grad_type_change(%a: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.gelu_grad' op requires the same type for all operands and results}}
  %0 = "mt.gelu_grad"(%a) : (!mt.tensor<[seq=4], f32>) -> !mt.tensor<[seq=4], bf16>
  return
}

// -----

// Tests that attention_grad checks the forward op's rules (here: causal attention needs
// equal query and key lengths), reported at the attention_grad.
func.func @attention_grad_forward_rule(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %k: !mt.tensor<[seq=6, heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op causal attention needs equal query and key lengths, got 4 and 6}}
  %0:3 = mt.attention_grad %q, %k, %k, %q dims(seq, heads, heads, head_dim) causal scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>, !mt.tensor<[seq=6, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention_grad checks the forward op's grouped-query rule.
func.func @attention_grad_groups(%q: !mt.tensor<[seq=4, heads=3, head_dim=4], f32>, %k: !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op query heads (3) must be a multiple of key/value heads (2)}}
  %0:3 = mt.attention_grad %q, %k, %k, %q dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=3, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=3, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=3, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention_grad's output gradient has the query's type.
func.func @attention_grad_output(%q: !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, %do: !mt.tensor<[heads=2, seq=4, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op output gradient must have the query's type}}
  %0:3 = mt.attention_grad %q, %q, %q, %do dims(seq, heads, heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[heads=2, seq=4, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that attention_grad's gradients have the types of query, key and value.
func.func @attention_grad_results(%q: !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, %k: !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>) {
  // expected-error @+1 {{'mt.attention_grad' op gradients must have the types of query, key and value}}
  %0:3 = mt.attention_grad %q, %k, %k, %q dims(seq, heads, kv_heads, head_dim) scale 0.5 : !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>, !mt.tensor<[seq=4, heads=4, head_dim=4], f32> -> !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, heads=4, head_dim=4], f32>, !mt.tensor<[seq=4, kv_heads=2, head_dim=4], f32>
  return
}

// -----

// Tests that embedding_grad produces a floating-point table.
func.func @embedding_grad_integer(%i: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[seq=4, hidden=8], i32>) {
  // expected-error @+1 {{'mt.embedding_grad' op expects floating-point result, got element type 'i32'}}
  %0 = mt.embedding_grad %i, %g over vocab : !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4, hidden=8], i32> -> !mt.tensor<[vocab=16, hidden=8], i32>
  return
}

// -----

// Tests that embedding_grad's indices are integers.
func.func @embedding_grad_float_indices(%i: !mt.tensor<[seq=4], f32>, %g: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.embedding_grad' op expects integer indices, got element type 'f32'}}
  %0 = mt.embedding_grad %i, %g over vocab : !mt.tensor<[seq=4], f32>, !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[vocab=16, hidden=8], f32>
  return
}

// -----

// Tests that embedding_grad scatters along a dimension of the table.
func.func @embedding_grad_missing(%i: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[seq=4, hidden=8], f32>) {
  // expected-error @+1 {{'mt.embedding_grad' op result [tok=16, hidden=8] has no dimension 'vocab'}}
  %0 = mt.embedding_grad %i, %g over vocab : !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[tok=16, hidden=8], f32>
  return
}

// -----

// Tests that embedding_grad's indices and the table's other dimensions are disjoint, as
// gather's are.
func.func @embedding_grad_shared(%i: !mt.tensor<[hidden=8], i32>, %g: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.embedding_grad' op dimension 'hidden' is in both the table and the indices}}
  %0 = mt.embedding_grad %i, %g over vocab : !mt.tensor<[hidden=8], i32>, !mt.tensor<[hidden=8], f32> -> !mt.tensor<[vocab=16, hidden=8], f32>
  return
}

// -----

// Tests that embedding_grad's gradient has the type gather produced.
func.func @embedding_grad_gradient(%i: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[hidden=8, seq=4], f32>) {
  // expected-error @+1 {{'mt.embedding_grad' op gradient type '!mt.tensor<[hidden=8, seq=4], f32>' does not match the expected '!mt.tensor<[seq=4, hidden=8], f32>'}}
  %0 = mt.embedding_grad %i, %g over vocab : !mt.tensor<[seq=4], i32>, !mt.tensor<[hidden=8, seq=4], f32> -> !mt.tensor<[vocab=16, hidden=8], f32>
  return
}

// -----

// Tests that cross_entropy_grad's loss gradient is a scalar.
func.func @ce_grad_loss(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[seq=4], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op loss gradient must be a floating-point scalar, got '!mt.tensor<[seq=4], f32>'}}
  %0 = mt.cross_entropy_grad %l, %t, %g over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4, vocab=16], f32>
  return
}

// -----

// Tests that cross_entropy_grad's result has the logits' type.
func.func @ce_grad_result(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op result type '!mt.tensor<[vocab=16, seq=4], f32>' does not match the expected '!mt.tensor<[seq=4, vocab=16], f32>'}}
  %0 = mt.cross_entropy_grad %l, %t, %g over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32>, !mt.tensor<[], f32> -> !mt.tensor<[vocab=16, seq=4], f32>
  return
}

// -----

// Tests that cross_entropy_grad's logits are floating-point, as cross_entropy's are.
func.func @ce_grad_integer_logits(%l: !mt.tensor<[seq=4, vocab=16], i32>, %t: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op expects floating-point logits, got element type 'i32'}}
  %0 = mt.cross_entropy_grad %l, %t, %g over vocab : !mt.tensor<[seq=4, vocab=16], i32>, !mt.tensor<[seq=4], i32>, !mt.tensor<[], f32> -> !mt.tensor<[seq=4, vocab=16], i32>
  return
}

// -----

// Tests that cross_entropy_grad's labels are integers.
func.func @ce_grad_float_labels(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], f32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op expects integer labels, got element type 'f32'}}
  %0 = mt.cross_entropy_grad %l, %t, %g over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[seq=4, vocab=16], f32>
  return
}

// -----

// Tests that cross_entropy_grad's class dimension must exist.
func.func @ce_grad_missing(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=4], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op logits [seq=4, vocab=16] has no dimension 'classes'}}
  %0 = mt.cross_entropy_grad %l, %t, %g over classes : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=4], i32>, !mt.tensor<[], f32> -> !mt.tensor<[seq=4, vocab=16], f32>
  return
}

// -----

// Tests that cross_entropy_grad's labels have the logits' dimensions without the class one.
func.func @ce_grad_labels(%l: !mt.tensor<[seq=4, vocab=16], f32>, %t: !mt.tensor<[seq=3], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.cross_entropy_grad' op labels [seq=3] must have the logits' dimensions without 'vocab', i.e. [seq=4]}}
  %0 = mt.cross_entropy_grad %l, %t, %g over vocab : !mt.tensor<[seq=4, vocab=16], f32>, !mt.tensor<[seq=3], i32>, !mt.tensor<[], f32> -> !mt.tensor<[seq=4, vocab=16], f32>
  return
}

// -----

// Tests that topk_grad's indices are integers.
func.func @topk_grad_float_indices(%g: !mt.tensor<[tokens=8, k=2], f32>) {
  // expected-error @+1 {{'mt.topk_grad' op expects integer indices, got element type 'f32'}}
  %0 = mt.topk_grad %g, %g over expert k k : !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that topk_grad's values gradient has the k dimension.
func.func @topk_grad_lacks_k(%g: !mt.tensor<[tokens=8, top=2], f32>, %i: !mt.tensor<[tokens=8, top=2], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op values gradient [tokens=8, top=2] has no dimension 'k'}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=8, top=2], f32>, !mt.tensor<[tokens=8, top=2], i32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that topk_grad's values gradient and indices have one set of dimensions.
func.func @topk_grad_indices(%g: !mt.tensor<[tokens=8, k=2], f32>, %i: !mt.tensor<[tokens=8, k=1], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op values gradient [tokens=8, k=2] and indices [tokens=8, k=1] must have the same dimensions}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=1], i32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that topk_grad's result has the dimension the forward op selected from.
func.func @topk_grad_missing(%g: !mt.tensor<[tokens=8, k=2], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op result [tokens=8, e=4] has no dimension 'expert'}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[tokens=8, e=4], f32>
  return
}

// -----

// Tests that topk_grad's k cannot exceed the dimension it scatters into, as for topk.
func.func @topk_grad_k(%g: !mt.tensor<[tokens=8, k=5], f32>, %i: !mt.tensor<[tokens=8, k=5], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op k = 5 exceeds the size 4 of 'expert'}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=8, k=5], f32>, !mt.tensor<[tokens=8, k=5], i32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that topk_grad's result is floating-point, as topk's operand is.
func.func @topk_grad_integer(%g: !mt.tensor<[tokens=8, k=2], i32>, %i: !mt.tensor<[tokens=8, k=2], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op expects floating-point result, got element type 'i32'}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], i32> -> !mt.tensor<[tokens=8, expert=4], i32>
  return
}

// -----

// Tests that topk_grad's k dimension is not a dimension of the result.
func.func @topk_grad_k_exists(%g: !mt.tensor<[k=2], f32>, %i: !mt.tensor<[k=2], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op new dimension 'k' already exists in the result [k=2, expert=4]}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[k=2], f32>, !mt.tensor<[k=2], i32> -> !mt.tensor<[k=2, expert=4], f32>
  return
}

// -----

// Tests that topk_grad's values gradient has the type topk's values had.
func.func @topk_grad_values(%g: !mt.tensor<[tokens=6, k=2], f32>, %i: !mt.tensor<[tokens=6, k=2], i32>) {
  // expected-error @+1 {{'mt.topk_grad' op values gradient type '!mt.tensor<[tokens=6, k=2], f32>' does not match the expected '!mt.tensor<[tokens=8, k=2], f32>'}}
  %0 = mt.topk_grad %g, %i over expert k k : !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that combine_grad checks combine's rules: the weights have the indices' dimensions.
func.func @combine_grad_weights(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=1], f32>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op weights [tokens=8, k=1] must have the dimensions of the indices [tokens=8, k=2]}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=1], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=1], f32>
  return
}

// -----

// Tests that combine_grad checks combine's rules: the indices are integers.
func.func @combine_grad_float_indices(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op expects integer indices, got element type 'f32'}}
  %0:2 = mt.combine_grad %x, %w, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that combine_grad checks combine's rules: the input has the capacity dimension.
func.func @combine_grad_input_lacks_capacity(%x: !mt.tensor<[expert=4, slot=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op input [expert=4, slot=5, hidden=4] has no dimension 'cap'}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, slot=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, slot=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that combine_grad checks combine's rules: expert and capacity are two dimensions.
func.func @combine_grad_same_dims(%x: !mt.tensor<[e=4, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op expert and capacity dimensions must differ, got 'e' for both}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from e capacity e : !mt.tensor<[e=4, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[e=4, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that combine_grad checks combine's rules: the weights have the input's element type.
func.func @combine_grad_weights_element(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], bf16>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op weights element type 'bf16' differs from the input's 'f32'}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], bf16>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], bf16>
  return
}

// -----

// Tests that combine_grad checks combine's rules: feature dimensions are not routing ones.
func.func @combine_grad_feature(%x: !mt.tensor<[expert=4, cap=5, tokens=8], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[tokens=8], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op feature dimension 'tokens' of the input is also a dimension of the indices}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, tokens=8], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8], f32> -> !mt.tensor<[expert=4, cap=5, tokens=8], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that combine_grad's output gradient has the type combine produced.
func.func @combine_grad_output(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[hidden=4, tokens=8], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op output gradient type '!mt.tensor<[hidden=4, tokens=8], f32>' does not match the expected '!mt.tensor<[tokens=8, hidden=4], f32>'}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[hidden=4, tokens=8], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], f32>
  return
}

// -----

// Tests that combine_grad's gradients have the types of the input and the weights.
func.func @combine_grad_results(%x: !mt.tensor<[expert=4, cap=5, hidden=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %w: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[tokens=8, hidden=4], f32>) {
  // expected-error @+1 {{'mt.combine_grad' op gradients must have the types of the input and the weights}}
  %0:2 = mt.combine_grad %x, %i, %w, %g k k from expert capacity cap : !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[tokens=8, hidden=4], f32> -> !mt.tensor<[expert=4, cap=5, hidden=4], f32>, !mt.tensor<[k=2, tokens=8], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad checks the forward op's rules: logits and indices
// route the same tokens.
func.func @lbl_grad_tokens(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=6, k=2], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op logits [tokens=8, expert=4] and indices [tokens=6, k=2] must route the same tokens}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=6, k=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad checks the forward op's rules: the logits have the
// expert dimension.
func.func @lbl_grad_missing_expert(%l: !mt.tensor<[tokens=8, e=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op logits [tokens=8, e=4] has no dimension 'expert'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, e=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, e=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad checks the forward op's rules: the indices are
// integers.
func.func @lbl_grad_float_indices(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], f32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op expects integer indices, got element type 'f32'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad checks the forward op's rules: the indices have the
// k dimension.
func.func @lbl_grad_indices_lack_k(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op indices [tokens=8] has no dimension 'k'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8], i32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad checks the forward op's rules: floating-point logits.
func.func @lbl_grad_integer_logits(%l: !mt.tensor<[tokens=8, expert=4], i32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op expects floating-point logits, got element type 'i32'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], i32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[tokens=8, expert=4], i32>
  return
}

// -----

// Tests that load_balancing_loss_grad's loss gradient is a scalar.
func.func @lbl_grad_loss_rank(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %g: !mt.tensor<[tokens=8], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op loss gradient must be a scalar of 'f32', got '!mt.tensor<[tokens=8], f32>'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[tokens=8], f32> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad's loss gradient has the loss's type, a scalar of the
// logits' element type.
func.func @lbl_grad_loss_element(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %g: !mt.tensor<[], bf16>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op loss gradient must be a scalar of 'f32', got '!mt.tensor<[], bf16>'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[], bf16> -> !mt.tensor<[tokens=8, expert=4], f32>
  return
}

// -----

// Tests that load_balancing_loss_grad's result has the logits' type.
func.func @lbl_grad_result(%l: !mt.tensor<[tokens=8, expert=4], f32>, %i: !mt.tensor<[tokens=8, k=2], i32>, %g: !mt.tensor<[], f32>) {
  // expected-error @+1 {{'mt.load_balancing_loss_grad' op result type '!mt.tensor<[expert=4, tokens=8], f32>' does not match the expected '!mt.tensor<[tokens=8, expert=4], f32>'}}
  %0 = mt.load_balancing_loss_grad %l, %i, %g over expert k k : !mt.tensor<[tokens=8, expert=4], f32>, !mt.tensor<[tokens=8, k=2], i32>, !mt.tensor<[], f32> -> !mt.tensor<[expert=4, tokens=8], f32>
  return
}

//===----------------------------------------------------------------------===//
// mt.repeat: carried and stacked values
//===----------------------------------------------------------------------===//

// -----

// Tests that repeat cannot carry more values than it has operands.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_carries_too_many(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op carries 2 values but has only 1 operands and 1 results}}
  %0 = mt.repeat @layer(%x) count 2 {carried = 2 : i64} : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that repeat cannot carry more values than it has results.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %s: !mt.tensor<[layers=2, hidden=8], f32>) attributes {mt.layer} {
  return
}
func.func @repeat_carries_results(%x: !mt.tensor<[hidden=8], f32>, %s: !mt.tensor<[layers=2, hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op carries 1 values but has only 2 operands and 0 results}}
  mt.repeat @layer(%x, %s) count 2 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=2, hidden=8], f32>) -> ()
  return
}

// -----

// Tests that the number of carried values is not negative.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_negative_carried(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op attribute 'carried' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = mt.repeat @layer(%x) count 2 {carried = -1 : i64} : (!mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that without `carried` every operand is carried, so operands and results pair up.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %y: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_unpaired(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op without 'carried' every operand is carried, so the op needs as many results as operands}}
  %0 = mt.repeat @layer(%x, %x) count 2 : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a stacked operand leads with the stacking dimension.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_unstacked(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op stacked operand [hidden=8] must lead with the stacking dimension 'layers' of size 3}}
  %0 = mt.repeat @layer(%x, %x) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a stacked operand's stacking dimension has one slice per call.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_wrong_count(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[layers=2, hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op stacked operand [layers=2, hidden=8] must lead with the stacking dimension 'layers' of size 3}}
  %0 = mt.repeat @layer(%x, %w) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=2, hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that the stacking dimension leads, not just exists.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_not_leading(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8, layers=3], f32>) {
  // expected-error @+1 {{'mt.repeat' op stacked operand [hidden=8, layers=3] must lead with the stacking dimension 'layers' of size 3}}
  %0 = mt.repeat @layer(%x, %w) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8, layers=3], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that stacked operands use the op's own stacking dimension.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_stack_dim(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[layers=3, hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op stacked operand [layers=3, hidden=8] must lead with the stacking dimension 'depth' of size 3}}
  %0 = mt.repeat @layer(%x, %w) count 3 {carried = 1 : i64, stack_dim = "depth"} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a stacked result leads with the stacking dimension.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>) attributes {mt.layer} {
  return %x, %x : !mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>
}
func.func @repeat_unstacked_result(%x: !mt.tensor<[hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op stacked result [hidden=8] must lead with the stacking dimension 'layers' of size 3}}
  %0:2 = mt.repeat @layer(%x) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>)
  return
}

// -----

// Tests that the layer sees one slice of each stacked operand: the slice's type must be
// the layer's argument type.
func.func @layer(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_slice_type(%x: !mt.tensor<[hidden=8], f32>, %w: !mt.tensor<[layers=3, hidden=4], f32>) {
  // expected-error @+1 {{'mt.repeat' op operand and result types do not match layer 'layer' of type '(!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>'}}
  %0 = mt.repeat @layer(%x, %w) count 3 {carried = 1 : i64} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=4], f32>) -> !mt.tensor<[hidden=8], f32>
  return
}

// -----

// Tests that a function derived from a layer can be repeated, but only with its own types.
func.func @block(%x: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer} {
  return %x : !mt.tensor<[hidden=8], f32>
}
func.func @block.bwd(%dy: !mt.tensor<[hidden=8], f32>, %saved: !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32> attributes {mt.layer_of = @block} {
  return %dy : !mt.tensor<[hidden=8], f32>
}
func.func @repeat_layer_of(%dy: !mt.tensor<[hidden=8], f32>, %saved: !mt.tensor<[layers=3, hidden=8], f32>) {
  // expected-error @+1 {{'mt.repeat' op operand and result types do not match layer 'block.bwd' of type '(!mt.tensor<[hidden=8], f32>, !mt.tensor<[hidden=8], f32>) -> !mt.tensor<[hidden=8], f32>'}}
  %0:2 = mt.repeat @block.bwd(%dy, %saved) count 3 {carried = 1 : i64, reverse} : (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>) -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[layers=3, hidden=8], f32>)
  return
}

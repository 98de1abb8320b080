// RUN: mt-opt %s -split-input-file -verify-diagnostics

// Tests the sharded tensor type's checks: an axis the mesh lacks, an axis used twice, a
// size that does not divide, a split of a missing dimension, and the mesh's own checks.

// expected-error @+1 {{split of 'heads': the mesh has no axis 'cp'}}
func.func private @no_axis(!mtp.tensor<[heads=4], f32, <[tp = 2]>, split {heads = [cp]}>)

// -----

// expected-error @+1 {{mesh axis 'tp' is used twice in one tensor}}
func.func private @axis_twice(!mtp.tensor<[heads=4, ffn=8], f32, <[tp = 2]>, split {heads = [tp], ffn = [tp]}>)

// -----

// expected-error @+1 {{mesh axis 'tp' is used twice in one tensor}}
func.func private @split_and_partial(!mtp.tensor<[heads=4], f32, <[tp = 2]>, split {heads = [tp]}, partial [tp]>)

// -----

// expected-error @+1 {{dimension 'heads' of size 6 cannot be split into 4 equal parts}}
func.func private @indivisible(!mtp.tensor<[heads=6], f32, <[tp = 4]>, split {heads = [tp]}>)

// -----

// expected-error @+1 {{split of dimension 'vocab', which the tensor [heads=4] does not have}}
func.func private @no_dim(!mtp.tensor<[heads=4], f32, <[tp = 2]>, split {vocab = [tp]}>)

// -----

// expected-error @+1 {{mesh axis 'tp' appears twice}}
func.func private @mesh_twice(!mtp.tensor<[heads=4], f32, <[tp = 2, tp = 2]>>)

// -----

// Tests that a dimension split by a two_chunk axis of size 2 needs 4 equal chunks.
// expected-error @+1 {{dimension 'seq' of size 6 cannot be split into 4 equal chunks (two per coordinate of a two_chunk axis)}}
func.func private @two_chunk_indivisible(!mtp.tensor<[seq=6], f32, <[cp = 2 two_chunk]>, split {seq = [cp]}>)

// -----

// expected-error @+1 {{mesh axis 'dp' has size 0; sizes are positive}}
func.func private @mesh_zero(!mtp.tensor<[heads=4], f32, <[dp = 0]>>)

// -----

// Tests the collectives' checks: each changes exactly one fact of the layout.

func.func @all_reduce_not_partial(%x: !mtp.tensor<[h=4], f32, <[tp = 2]>>) {
  // expected-error @+1 {{the operand is not partial over 'tp': there is nothing to sum}}
  %y = mtp.all_reduce %x over ["tp"] : !mtp.tensor<[h=4], f32, <[tp = 2]>> -> !mtp.tensor<[h=4], f32, <[tp = 2]>>
  return
}

// -----

func.func @all_reduce_wrong_result(%x: !mtp.tensor<[h=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{result type must be '!mtp.tensor<[h=4], f32, <[tp = 2]>>'}}
  %y = mtp.all_reduce %x over ["tp"] : !mtp.tensor<[h=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[h=4], f32, <[tp = 2]>, split {h = [tp]}>
  return
}

// -----

func.func @gather_not_split(%x: !mtp.tensor<[s=8], f32, <[tp = 2]>>) {
  // expected-error @+1 {{dimension 's' is not split over 'tp' (innermost) in the operand}}
  %y = mtp.all_gather %x over "tp" along "s" : !mtp.tensor<[s=8], f32, <[tp = 2]>> -> !mtp.tensor<[s=8], f32, <[tp = 2]>>
  return
}

// -----

func.func @scatter_indivisible(%x: !mtp.tensor<[s=3], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{dimension 's' of size 3 cannot be split into 2 equal parts}}
  %y = mtp.reduce_scatter %x over "tp" along "s" : !mtp.tensor<[s=3], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=3], f32, <[tp = 2]>>
  return
}

// -----

func.func @scatter_no_dim(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{the tensor [s=4] has no dimension 'h'}}
  %y = mtp.reduce_scatter %x over "tp" along "h" : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

func.func @all_to_all_same_dim(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>) {
  // expected-error @+1 {{moves the split of 'tp' from 's' to itself}}
  %y = mtp.all_to_all %x over "tp" from "s" to "s" : !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// -----

func.func @shift_no_peer(%x: !mtp.tensor<[s=4], f32, <[cp = 2]>, split {s = [cp]}>) {
  // expected-error @+1 {{shift -2 is not a step to another rank along 'cp' of size 2}}
  %y = mtp.shift %x over "cp" offset -2 rotate : !mtp.tensor<[s=4], f32, <[cp = 2]>, split {s = [cp]}>
  return
}

// -----

func.func @shift_no_axis(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>>) {
  // expected-error @+1 {{the mesh has no axis 'cp'}}
  %y = mtp.shift %x over "cp" offset 1 rotate : !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

func.func @send_no_peer(%x: !mtp.tensor<[s=4], f32, <[pp = 2]>>) {
  // expected-error @+1 {{shift 2 is not a step to another rank along 'pp' of size 2}}
  mtp.send %x over "pp" shift 2 : !mtp.tensor<[s=4], f32, <[pp = 2]>>
  return
}

// -----

func.func @recv_no_axis() {
  // expected-error @+1 {{the mesh has no axis 'pp'}}
  %x = mtp.recv over "pp" shift -1 : !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

func.func @all_to_all_indivisible(%x: !mtp.tensor<[s=4, h=3], f32, <[tp = 2]>, split {s = [tp]}>) {
  // expected-error @+1 {{dimension 'h' of size 3 cannot be split into 2 equal parts}}
  %y = mtp.all_to_all %x over "tp" from "s" to "h" : !mtp.tensor<[s=4, h=3], f32, <[tp = 2]>, split {s = [tp]}> -> !mtp.tensor<[s=4, h=3], f32, <[tp = 2]>>
  return
}

// -----

func.func @all_slice_partial(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{the operand is partial over 'tp': sum it before slicing}}
  %y = mtp.all_slice %x over "tp" along "s" : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// -----

func.func @all_slice_axis_used(%x: !mtp.tensor<[s=4, h=4], f32, <[tp = 2]>, split {h = [tp]}>) {
  // expected-error @+1 {{'tp' already splits dimension 'h'}}
  %y = mtp.all_slice %x over "tp" along "s" : !mtp.tensor<[s=4, h=4], f32, <[tp = 2]>, split {h = [tp]}> -> !mtp.tensor<[s=4, h=4], f32, <[tp = 2]>, split {h = [tp]}>
  return
}

// -----

func.func @all_slice_indivisible(%x: !mtp.tensor<[s=3], f32, <[tp = 2]>>) {
  // expected-error @+1 {{dimension 's' of size 3 cannot be split into 2 equal parts}}
  %y = mtp.all_slice %x over "tp" along "s" : !mtp.tensor<[s=3], f32, <[tp = 2]>> -> !mtp.tensor<[s=3], f32, <[tp = 2]>>
  return
}

// -----

func.func @from_local_wrong_shape(%x: !mt.tensor<[s=4], f32>) {
  // expected-error @+1 {{the local tensor of '!mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>' is}}
  %y = mtp.from_local %x : !mt.tensor<[s=4], f32> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// -----

func.func @to_local_wrong_shape(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>) {
  // expected-error @+1 {{op the local tensor of}}
  %y = mtp.to_local %x : !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}> -> !mt.tensor<[s=4], f32>
  return
}

// -----

// Tests that a reduction kind other than sum, max and min is an error where it is written.
func.func @all_reduce_unknown_reduction(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{unknown reduction 'avg' (expected sum, max or min)}}
  %y = mtp.all_reduce %x over ["tp"] reduction = avg : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

// Tests that the reduction attribute refuses an unknown kind in the generic form too.
func.func @generic_unknown_reduction(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+2 {{expected ::mtc::mtp::Reduction to be one of: sum, max, min}}
  // expected-error @+1 {{failed to parse MTP_ReductionAttr parameter 'value'}}
  %y = "mtp.all_reduce"(%x) <{over = ["tp"], reduction = #mtp.reduction<avg>}> : (!mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

// Tests that the reduction is the dialect's enum, not a string (the former spelling).
func.func @string_reduction(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{attribute 'reduction' failed to satisfy constraint: how a collective combines the ranks' values: sum, max or min}}
  %y = mtp.all_reduce %x over ["tp"] {reduction = "max"} : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

// Tests that reduce_scatter takes the same reduction kinds.
func.func @reduce_scatter_unknown_reduction(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{unknown reduction 'prod' (expected sum, max or min)}}
  %y = mtp.reduce_scatter %x over "tp" along "s" reduction = prod : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// -----

// Tests that every collective checks its axes against the mesh (CollectiveOpInterface):
// recv, which has no operand, against its result's.
func.func @recv_no_axis() {
  // expected-error @+1 {{'mtp.recv' op the mesh has no axis 'pp'}}
  %y = mtp.recv over "pp" shift 1 : !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return
}

// -----

// Tests that `mtp.layout` must be a laid-out type.
func.func @layout_not_a_layout(%x: !mt.tensor<[s=2], f32>) {
  // expected-error @+1 {{'mtp.layout' must be a laid-out tensor type (!mtp.tensor<...>), not f32}}
  %y = mt.dropout %x rate 0.1 stream 0 {mtp.layout = f32} : <[s=2], f32>
  return
}

// -----

// Tests that `mtp.mesh` must be a mesh.
// expected-error @+1 {{'mtp.mesh' must be a mesh (#mtp.mesh<...>), not 3 : i64}}
module attributes {mtp.mesh = 3} {
}

// -----

// Tests that an `mtp.` attribute the dialect does not declare is an error (a misspelling).
// expected-error @+1 {{the mtp dialect has no attribute 'mtp.layuot' (it has 'mtp.layout' and 'mtp.mesh')}}
func.func private @misspelt(!mt.tensor<[s=2], f32>) attributes {mtp.layuot = 1}

// -----

func.func @to_partial_split(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>) {
  // expected-error @+1 {{'tp' splits dimension 's': the operand is not whole over it}}
  %y = mtp.to_partial %x over "tp" : !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// -----

func.func @to_partial_twice(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  // expected-error @+1 {{the operand is already partial over 'tp'}}
  %y = mtp.to_partial %x over "tp" : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  return
}

// -----

func.func @all_to_all_filled_float(%x: !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}>, %n: !mt.tensor<[experts=4], f32>) {
  // expected-error @+1 {{filled counts '!mt.tensor<[experts=4], f32>' must be i64 over the whole expert dimension, 'capacity' or 'experts'}}
  %y = mtp.all_to_all %x over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=4], f32>) : !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {experts = [ep]}>
  return
}

// -----

func.func @all_to_all_filled_local_experts(%x: !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}>, %n: !mt.tensor<[experts=2], i64>) {
  // expected-error @+1 {{filled counts '!mt.tensor<[experts=2], i64>' must be i64 over the whole expert dimension, 'capacity' or 'experts'}}
  %y = mtp.all_to_all %x over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=2], i64>) : !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=8], f32, <[ep = 2]>, split {experts = [ep]}>
  return
}

// -----

func.func @all_to_all_filled_slots_not_leading(%x: !mtp.tensor<[hidden=2, experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}>, %n: !mt.tensor<[experts=4], i64>) {
  // expected-error @+1 {{with filled counts moves expert slots, which lead the operand: [hidden=2, experts=4, capacity=8] does not start with 'capacity' and 'experts'}}
  %y = mtp.all_to_all %x over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=4], i64>) : !mtp.tensor<[hidden=2, experts=4, capacity=8], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[hidden=2, experts=4, capacity=8], f32, <[ep = 2]>, split {experts = [ep]}>
  return
}

// RUN: mt-opt %s -split-input-file -canonicalize | FileCheck %s

// Tests that a transpose of a transpose becomes one transpose from the first operand.
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2, b=3, c=4], f32>)
// CHECK-NEXT: %[[T:.*]] = mt.transpose %[[X]] : <[a=2, b=3, c=4], f32> to <[c=4, a=2, b=3], f32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: !mt.tensor<[a=2, b=3, c=4], f32>) -> !mt.tensor<[c=4, a=2, b=3], f32> {
  %0 = mt.transpose %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[b=3, a=2, c=4], f32>
  %1 = mt.transpose %0 : !mt.tensor<[b=3, a=2, c=4], f32> to !mt.tensor<[c=4, a=2, b=3], f32>
  return %1 : !mt.tensor<[c=4, a=2, b=3], f32>
}

// -----

// Tests that a transpose and its inverse cancel.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2, b=3], f32>)
// CHECK-NOT: mt.transpose
// CHECK: return %[[X]]
func.func @transpose_inverse(%x: !mt.tensor<[a=2, b=3], f32>) -> !mt.tensor<[a=2, b=3], f32> {
  %0 = mt.transpose %x : !mt.tensor<[a=2, b=3], f32> to !mt.tensor<[b=3, a=2], f32>
  %1 = mt.transpose %0 : !mt.tensor<[b=3, a=2], f32> to !mt.tensor<[a=2, b=3], f32>
  return %1 : !mt.tensor<[a=2, b=3], f32>
}

// -----

// Tests that a transpose to the operand's own order is the operand.
// CHECK-LABEL: func.func @transpose_same_order
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2, b=3], f32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_same_order(%x: !mt.tensor<[a=2, b=3], f32>) -> !mt.tensor<[a=2, b=3], f32> {
  %0 = mt.transpose %x : !mt.tensor<[a=2, b=3], f32> to !mt.tensor<[a=2, b=3], f32>
  return %0 : !mt.tensor<[a=2, b=3], f32>
}

// -----

// Tests that reductions over no dimension are the identity.
// CHECK-LABEL: func.func @reduce_over_nothing
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2], f32>)
// CHECK-NOT: mt.reduce
// CHECK: return %[[X]], %[[X]], %[[X]]
func.func @reduce_over_nothing(%x: !mt.tensor<[a=2], f32>)
    -> (!mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>) {
  %0 = mt.reduce_sum %x over [] : !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %1 = mt.reduce_mean %x over [] : !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %2 = mt.reduce_max %x over [] : !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  return %0, %1, %2 : !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>
}

// -----

// Tests that multiplying by one and adding zero (on either side), subtracting zero and
// dividing by one fold to the other operand.
// CHECK-LABEL: func.func @arithmetic_identities
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2], f32>)
// CHECK-NOT: mt.mul
// CHECK-NOT: mt.add
// CHECK-NOT: mt.sub
// CHECK-NOT: mt.div
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @arithmetic_identities(%x: !mt.tensor<[a=2], f32>)
    -> (!mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>,
        !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>) {
  %one = mt.constant 1.0 : !mt.tensor<[], f32>
  %zero = mt.constant 0.0 : !mt.tensor<[], f32>
  %0 = mt.mul %x, %one : !mt.tensor<[a=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[a=2], f32>
  %1 = mt.mul %one, %x : !mt.tensor<[], f32>, !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %2 = mt.add %x, %zero : !mt.tensor<[a=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[a=2], f32>
  %3 = mt.add %zero, %x : !mt.tensor<[], f32>, !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %4 = mt.sub %x, %zero : !mt.tensor<[a=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[a=2], f32>
  %5 = mt.div %x, %one : !mt.tensor<[a=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[a=2], f32>
  return %0, %1, %2, %3, %4, %5 : !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>,
                                  !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>
}

// -----

// Tests that the identities do not fold where they are not identities: zero minus x,
// one divided by x, a constant other than the identity, and a constant that broadcasts
// (the result has dimensions the other operand lacks).
// CHECK-LABEL: func.func @arithmetic_non_identities
// CHECK: mt.sub
// CHECK: mt.div
// CHECK: mt.mul
// CHECK: mt.add
func.func @arithmetic_non_identities(%x: !mt.tensor<[a=2], f32>, %y: !mt.tensor<[b=3], f32>)
    -> (!mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>,
        !mt.tensor<[a=2, b=3], f32>) {
  %one = mt.constant 1.0 : !mt.tensor<[], f32>
  %zero = mt.constant 0.0 : !mt.tensor<[], f32>
  %two = mt.constant 2.0 : !mt.tensor<[], f32>
  %0 = mt.sub %zero, %x : !mt.tensor<[], f32>, !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %1 = mt.div %one, %x : !mt.tensor<[], f32>, !mt.tensor<[a=2], f32> -> !mt.tensor<[a=2], f32>
  %2 = mt.mul %x, %two : !mt.tensor<[a=2], f32>, !mt.tensor<[], f32> -> !mt.tensor<[a=2], f32>
  %zeros = mt.broadcast %zero : !mt.tensor<[], f32> to !mt.tensor<[b=3], f32>
  %3 = mt.add %x, %zeros : !mt.tensor<[a=2], f32>, !mt.tensor<[b=3], f32> -> !mt.tensor<[a=2, b=3], f32>
  return %0, %1, %2, %3 : !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>, !mt.tensor<[a=2], f32>,
                          !mt.tensor<[a=2, b=3], f32>
}

// -----

// Tests that renaming a dimension to its own name is the identity.
// CHECK-LABEL: func.func @rename_same_name
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[seq=4], f32>)
// CHECK-NEXT: return %[[X]]
func.func @rename_same_name(%x: !mt.tensor<[seq=4], f32>) -> !mt.tensor<[seq=4], f32> {
  %0 = mt.rename %x seq to seq : !mt.tensor<[seq=4], f32> -> !mt.tensor<[seq=4], f32>
  return %0 : !mt.tensor<[seq=4], f32>
}

// -----

// Tests that merging what a split split, and splitting what a merge merged, are the
// identity.
// CHECK-LABEL: func.func @split_merge_inverse
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[batch=2, hidden=8], f32>, %[[Y:.*]]: !mt.tensor<[heads=2, head_dim=4], f32>)
// CHECK-NOT: mt.split
// CHECK-NOT: mt.merge
// CHECK: return %[[X]], %[[Y]]
func.func @split_merge_inverse(%x: !mt.tensor<[batch=2, hidden=8], f32>,
                               %y: !mt.tensor<[heads=2, head_dim=4], f32>)
    -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[heads=2, head_dim=4], f32>) {
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[batch=2, heads=2, head_dim=4], f32>
  %1 = mt.merge %0 [heads, head_dim] into hidden : !mt.tensor<[batch=2, heads=2, head_dim=4], f32> -> !mt.tensor<[batch=2, hidden=8], f32>
  %2 = mt.merge %y [heads, head_dim] into hidden : !mt.tensor<[heads=2, head_dim=4], f32> -> !mt.tensor<[hidden=8], f32>
  %3 = mt.split %2 hidden into [heads, head_dim] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[heads=2, head_dim=4], f32>
  return %1, %3 : !mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[heads=2, head_dim=4], f32>
}

// -----

// Tests that a merge in another order than the split, or into other sizes, stays.
// CHECK-LABEL: func.func @split_merge_not_inverse
// CHECK: mt.split
// CHECK: mt.merge
// CHECK: mt.merge
// CHECK: mt.split
func.func @split_merge_not_inverse(%x: !mt.tensor<[hidden=8], f32>, %y: !mt.tensor<[heads=2, head_dim=4], f32>)
    -> (!mt.tensor<[hidden=8], f32>, !mt.tensor<[heads=4, head_dim=2], f32>) {
  %0 = mt.split %x hidden into [heads, head_dim] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[heads=2, head_dim=4], f32>
  %1 = mt.merge %0 [head_dim, heads] into hidden : !mt.tensor<[heads=2, head_dim=4], f32> -> !mt.tensor<[hidden=8], f32>
  %2 = mt.merge %y [heads, head_dim] into hidden : !mt.tensor<[heads=2, head_dim=4], f32> -> !mt.tensor<[hidden=8], f32>
  %3 = mt.split %2 hidden into [heads, head_dim] : !mt.tensor<[hidden=8], f32> -> !mt.tensor<[heads=4, head_dim=2], f32>
  return %1, %3 : !mt.tensor<[hidden=8], f32>, !mt.tensor<[heads=4, head_dim=2], f32>
}

// -----

// Tests that a cast to the operand's own type is the operand, and a real cast stays.
// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.*]]: !mt.tensor<[a=2], bf16>)
// CHECK-NEXT: %[[C:.*]] = mt.cast %[[X]] : <[a=2], bf16> to <[a=2], f32>
// CHECK-NEXT: return %[[X]], %[[C]]
func.func @cast_same_type(%x: !mt.tensor<[a=2], bf16>) -> (!mt.tensor<[a=2], bf16>, !mt.tensor<[a=2], f32>) {
  %0 = mt.cast %x : !mt.tensor<[a=2], bf16> to !mt.tensor<[a=2], bf16>
  %1 = mt.cast %x : !mt.tensor<[a=2], bf16> to !mt.tensor<[a=2], f32>
  return %0, %1 : !mt.tensor<[a=2], bf16>, !mt.tensor<[a=2], f32>
}

//===- MTPOps.td - mtp dialect operations -------------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPOPS_TD
#define MTC_DIALECTS_MTP_IR_MTPOPS_TD

include "dialects/mtp/IR/MTPInterfaces.td"
include "dialects/mtp/IR/MTPTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// A rank's local tensor: an `mt` named-dimension tensor.
def MTP_LocalTensor : Type<CPred<"::llvm::isa<::mtc::mt::NamedTensorType>($_self)">,
                           "named-dimension tensor", "::mtc::mt::NamedTensorType">;

class MTP_Op<string mnemonic, list<Trait> traits = []> : Op<MTP_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// An op working along mesh axes `over` (a string, or a list of them) of the mesh of the
/// laid-out type of `laidOut` (the accessor of its operand or result):
/// CollectiveOpInterface checks the mesh has them, the op's verifier what it does.
class MTP_CollectiveOp<string mnemonic, list<Trait> traits = [],
                       string laidOut = "getInput()">
    : MTP_Op<mnemonic, !listconcat(traits, [MTP_CollectiveOpInterface])> {
  let extraClassDeclaration = [{
    ::llvm::SmallVector<::llvm::StringRef> getMeshAxes() {
      return ::mtc::mtp::axisNames(getOverAttr());
    }
    ::mtc::mtp::ShardedTensorType getLaidOutType() {
      return ::llvm::cast<::mtc::mtp::ShardedTensorType>(}] # laidOut # [{.getType());
    }
  }];
}

/// The reduction of a collective that combines partial values (sum unless written).
def MTP_DefaultSumReductionAttr
    : DefaultValuedAttr<MTP_ReductionAttr, "::mtc::mtp::Reduction::Sum">;

/// A collective from one layout of a tensor to another, written
/// `%y = mtp.<op> %x over <over> <details> [reduction = <kind>] : T -> U`: `details` are
/// its arguments beyond the operand and the axes, printed as `detailsFormat`; `reduces`
/// adds the reduction.
class MTP_LayoutChangeOp<string mnemonic, dag details = (ins), string detailsFormat = "",
                         Attr overAttr = StrAttr, bit reduces = 0>
    : MTP_CollectiveOp<mnemonic, [Pure]> {
  let arguments = !con((ins MTP_ShardedTensorType:$input, overAttr:$over), details,
                       !if(reduces, (ins MTP_DefaultSumReductionAttr:$reduction), (ins)));
  let results = (outs MTP_ShardedTensorType:$result);
  let assemblyFormat = !interleave(
      !filter(part, ["$input `over` $over", detailsFormat,
                     !if(reduces, "(`reduction` `=` custom<Reduction>($reduction)^)?", ""),
                     "attr-dict `:` type($input) `->` type($result)"], !ne(part, "")), " ");
}

def MTP_AllReduceOp : MTP_LayoutChangeOp<"all_reduce", (ins), "", StrArrayAttr,
                                         /*reduces=*/1> {
  let summary = "combine partial values over mesh axes";
  let description = [{
    `%y = mtp.all_reduce %x over ["tp"] : T -> U`: `%x` is partial over every axis of
    `over`; `%y` is `%x`'s type without those partial axes (layout otherwise unchanged).
    Partial values are summed; with `reduction = max` (or `min`) they are partial maxima
    (minima) of a maximum over a split dimension, which the partitioner combines right
    where it is computed, and the result is their maximum (minimum).
  }];
}

def MTP_ReduceScatterOp : MTP_LayoutChangeOp<"reduce_scatter", (ins StrAttr:$along),
                                             "`along` $along", StrAttr, /*reduces=*/1> {
  let summary = "combine partial values over an axis, leaving each rank one part of a dimension";
  let description = [{
    `%y = mtp.reduce_scatter %x over "tp" along "seq" : T -> U`: `%x` is partial over
    `tp`; `%y` is not, and `seq` is split over `tp` (appended to its axes). Partial values
    are summed unless `reduction = max` or `min` says otherwise.
  }];
}

def MTP_AllGatherOp : MTP_LayoutChangeOp<"all_gather", (ins StrAttr:$along),
                                         "`along` $along"> {
  let summary = "gather the parts of a dimension split over an axis";
  let description = [{
    `%y = mtp.all_gather %x over "tp" along "seq" : T -> U`: `seq` is split over `tp` (its
    innermost axis) in `%x` and not in `%y`.
  }];
}

def MTP_AllSliceOp : MTP_LayoutChangeOp<"all_slice", (ins StrAttr:$along),
                                        "`along` $along"> {
  let summary = "keep this rank's part of a dimension that an axis replicates";
  let description = [{
    `%y = mtp.all_slice %x over "tp" along "vocab" : T -> U`: the inverse of `all_gather`
    and no communication: every rank already holds the whole dimension and keeps the part
    its coordinate along `tp` owns; `vocab` is split over `tp` (appended) in `%y`.
  }];
}

def MTP_ToPartialOp : MTP_LayoutChangeOp<"to_partial"> {
  let summary = "a whole value as partial sums over an axis, without communication";
  let description = [{
    `%y = mtp.to_partial %x over "tp" : T -> U`: `%x` is the same on every rank along `tp`
    (not split or partial over it); in `%y` the rank at coordinate 0 holds it and the others
    hold 0, so that `%y` is partial over `tp` and sums to `%x` exactly. Lets a sum of partial
    and whole values stay partial (one all-reduce for the whole sum).
  }];
}

def MTP_AllToAllOp
    : MTP_LayoutChangeOp<"all_to_all",
                         (ins StrAttr:$from, StrAttr:$to, Optional<MTP_LocalTensor>:$filled),
                         "`from` $from `to` $to (`filled` `(` $filled^ `:` type($filled) `)`)?"> {
  let summary = "move the split of an axis from one dimension to another";
  let description = [{
    `%y = mtp.all_to_all %x over "tp" from "seq" to "heads" : T -> U`: `seq` is split
    over `tp` (innermost) in `%x`; in `%y` it is not, and `heads` is (appended).

    With `filled(%n : !mt.tensor<[experts=E], i64>)` the operand holds expert slots: of
    `from` and `to`, the one `%n` names is the expert dimension (E, global), the other the
    slot dimension, and the two lead the operand. `%n` is this rank's count of the slots it
    filled for each expert, as the ranks splitting the slot dimension hold them (a rank
    routing its own tokens: mt.expert_load of its indices); the filled slots of an expert
    are a prefix of each such rank's part of the slot dimension (mt.dispatch fills them
    first come, first served). Only those slots travel (an all-to-all-v, after a small
    all-to-all of the counts); every other slot of the result is zero. The expert dimension
    is whole on the operand's slot side.
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::llvm::StringRef":$over,
                   "::llvm::StringRef":$from, "::llvm::StringRef":$to), [{
      build($_builder, $_state, result, input, over, from, to, ::mlir::Value());
    }]>
  ];
}

def MTP_ShiftOp : MTP_CollectiveOp<"shift", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "pass every rank's part `offset` steps along a mesh axis";
  let description = [{
    `%y = mtp.shift %x over "cp" offset 1 rotate : T`: every rank sends its `%x` to the
    rank `offset` steps further along `cp` and receives, as `%y`, what the rank `offset`
    steps before it sent. With `rotate` the axis is a ring (the last rank sends to the
    first); without it the ranks with no such peer send nothing and receive zeros. `%y`
    has `%x`'s type: the layout says how the parts are cut, not which rank's part a rank
    holds (ring attention passes key and value blocks around the context-parallel ring
    this way; upstream's `shard.shift` is the model). `offset` is non-zero and smaller
    than the axis in magnitude.
  }];
  let arguments = (ins MTP_ShardedTensorType:$input, StrAttr:$over, I64Attr:$offset,
                       UnitAttr:$rotate);
  let results = (outs MTP_ShardedTensorType:$result);
  let assemblyFormat = "$input `over` $over `offset` $offset (`rotate` $rotate^)? attr-dict `:` type($input)";
}

def MTP_SendOp : MTP_CollectiveOp<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "send a tensor to the rank `shift` steps along a mesh axis";
  let description = [{
    `mtp.send %x over "pp" shift 1 : T` sends to the next rank along `pp` (pipeline
    stages); the rank at the end of the axis has no such peer and sends nothing. `shift`
    is non-zero and smaller than the axis in magnitude.
  }];
  let arguments = (ins MTP_ShardedTensorType:$input, StrAttr:$over, I64Attr:$shift);
  let assemblyFormat = "$input `over` $over `shift` $shift attr-dict `:` type($input)";
}

def MTP_RecvOp : MTP_CollectiveOp<"recv", [MemoryEffects<[MemRead]>], "getResult()"> {
  let summary = "receive a tensor from the rank `shift` steps along a mesh axis";
  let description = [{
    `%x = mtp.recv over "pp" shift -1 : T` receives what the previous rank along `pp`
    sent (the matching `send` has the opposite shift).
  }];
  let arguments = (ins StrAttr:$over, I64Attr:$shift);
  let results = (outs MTP_ShardedTensorType:$result);
  let assemblyFormat = "`over` $over `shift` $shift attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Between the per-rank program and its layouts
//===----------------------------------------------------------------------===//

def MTP_FromLocalOp : MTP_Op<"from_local", [Pure]> {
  let summary = "view a rank's local tensor as its part of a laid-out tensor";
  let description = [{
    `%s = mtp.from_local %x : !mt.tensor<[heads=2], f32> -> !mtp.tensor<[heads=4], f32,
    <[tp = 2]>, split {heads = [tp]}>`: the partitioned program computes on local `mt`
    tensors; collectives take and give laid-out tensors. The operand must be the result's
    local type. Lowering makes it nothing.
  }];
  let arguments = (ins MTP_LocalTensor:$input);
  let results = (outs MTP_ShardedTensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def MTP_ToLocalOp : MTP_Op<"to_local", [Pure]> {
  let summary = "the local tensor a rank holds of a laid-out tensor";
  let description = [{
    `%x = mtp.to_local %s : !mtp.tensor<...> -> !mt.tensor<...>`: the inverse of
    `from_local`; the result must be the operand's local type.
  }];
  let arguments = (ins MTP_ShardedTensorType:$input);
  let results = (outs MTP_LocalTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

#endif // MTC_DIALECTS_MTP_IR_MTPOPS_TD

//===- PartitionOpInterface.td - partition rules of mt ops --*- tablegen -*-===//

#ifndef MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_TD
#define MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def PartitionOpInterface : OpInterface<"PartitionOpInterface"> {
  let cppNamespace = "::mtc::sharding";
  let description = [{
    An op that knows how it computes on parts of its operands: its partition rule.
    `mtp-partition` is a driver over this interface. For each op, in program order, it
    asks `getPartitionRule` which layouts the op computes on given the layouts its operands
    have, brings each operand to its layout (the derived collectives, `mtp.all_reduce`,
    `mtp.reduce_scatter`, `mtp.all_gather`, `mtp.all_slice`, `mtp.to_partial`), gives the
    results the local types of their layouts, and calls `buildLocalOp` for whatever else
    the op's local form needs.

    The rules are attached to the `mt` ops as external models (PartitionRules.cpp), the way
    the VJPs are, so the dialect does not depend on sharding, and a new op or a new mesh
    axis adds a rule rather than a branch of the partitioner. An op without this interface
    cannot be partitioned: the pass reports it. (`mt.repeat` is partitioned by the driver
    itself: its rule is its layer function's.)
  }];
  let methods = [
    InterfaceMethod<[{
      The layouts the op computes on: one target layout per operand, given the layout
      each operand has (`operandLayouts`, one per operand), and the layout of each result
      (a layout of the result's global type). The driver inserts the collectives from
      each operand's layout to its target. Fails, with a diagnostic on the op, where the
      rule cannot lay the op out.
    }], "::mlir::FailureOr<::mtc::sharding::PartitionRule>", "getPartitionRule",
    (ins "const ::mtc::sharding::PartitionContext &":$context,
         "::llvm::ArrayRef<::mtc::sharding::Layout>":$operandLayouts)>,
    InterfaceMethod<[{
      Completes the op's local form once its operands have their target layouts and its
      results their local types (`layouts` holds the laid-out type of every value so
      far; values this method creates must be entered there). By default the op is
      complete: the same op on local parts computes this rank's part. Ops whose local
      computation needs more add it: where this rank's part lies in the whole (the
      `mtp.layout` attribute), the combination of partial maxima, the scaling of a local
      mean.
    }], "::mlir::LogicalResult", "buildLocalOp",
    (ins "const ::mtc::sharding::PartitionContext &":$context,
         "::mtc::sharding::ValueLayouts &":$layouts),
    /*methodBody=*/"", /*defaultImplementation=*/[{ return ::mlir::success(); }]>,
  ];
}

#endif // MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_TD

//===- MTPInterfaces.td - mtp dialect interfaces ------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPINTERFACES_TD
#define MTC_DIALECTS_MTP_IR_MTPINTERFACES_TD

include "mlir/IR/OpBase.td"

def MTP_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mtc::mtp";
  let description = [{
    An op that communicates (or, for `all_slice` and `to_partial`, changes a layout as
    communication would) along axes of the mesh of a laid-out tensor. Its verifier checks
    that the mesh has every axis; each op's own verifier checks what the op does to the
    layout.
  }];
  let methods = [
    InterfaceMethod<"The mesh axes the op works along, in the order given.",
                    "::llvm::SmallVector<::llvm::StringRef>", "getMeshAxes">,
    InterfaceMethod<"The laid-out tensor whose mesh the axes are of (the operand, or the "
                    "result of an op without one).",
                    "::mtc::mtp::ShardedTensorType", "getLaidOutType">,
  ];
  let verify = [{ return ::mtc::mtp::detail::verifyCollective($_op); }];
}

#endif // MTC_DIALECTS_MTP_IR_MTPINTERFACES_TD

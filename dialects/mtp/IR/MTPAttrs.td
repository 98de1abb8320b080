//===- MTPAttrs.td - mtp dialect attributes -----------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPATTRS_TD
#define MTC_DIALECTS_MTP_IR_MTPATTRS_TD

include "dialects/mtp/IR/MTPBase.td"

def MTP_MeshAttr : AttrDef<MTP_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "a device mesh: named axes with sizes";
  let description = [{
    `#mtp.mesh<[dp = 2, tp = 4]>`: 8 devices, rank r at coordinates (r / 4, r % 4) (the
    last axis varies fastest). Axis names are unique; sizes are positive.
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "axis names">:$axisNames,
    ArrayRefParameter<"int64_t", "axis sizes">:$axisSizes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The size of axis `name`, if the mesh has it.
    std::optional<int64_t> getAxisSize(::llvm::StringRef name) const;
    /// Devices in the mesh (the product of the sizes).
    int64_t getNumDevices() const;
  }];
}

#endif // MTC_DIALECTS_MTP_IR_MTPATTRS_TD

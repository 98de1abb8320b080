//===- MTPAttrs.td - mtp dialect attributes -----------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPATTRS_TD
#define MTC_DIALECTS_MTP_IR_MTPATTRS_TD

include "dialects/mtp/IR/MTPBase.td"
include "mlir/IR/EnumAttr.td"

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

// The values are the runtime's reduction codes (MtcReduction in
// runtime/comm/CollectiveTypes.h), which the code generator passes through as they are;
// compiler/codegen/ToLinalg/CollectivesToCalls.cpp checks the equality when it compiles.
def MTP_ReductionSum : I32EnumAttrCase<"Sum", 0, "sum">;
def MTP_ReductionMax : I32EnumAttrCase<"Max", 1, "max">;
def MTP_ReductionMin : I32EnumAttrCase<"Min", 2, "min">;

def MTP_Reduction : I32EnumAttr<"Reduction", "how a collective combines the ranks' values",
                                [MTP_ReductionSum, MTP_ReductionMax, MTP_ReductionMin]> {
  let cppNamespace = "::mtc::mtp";
  let genSpecializedAttr = 0;
}

def MTP_ReductionAttr : EnumAttr<MTP_Dialect, MTP_Reduction, "reduction"> {
  let summary = "how a collective combines the ranks' values: sum, max or min";
  let description = [{
    Element by element over the ranks: `sum` (partial sums, the default), `max` or `min`
    (partial maxima or minima, of a maximum or minimum over a split dimension). Written
    `reduction = max` in an op (nothing for the default `sum`), `#mtp.reduction<max>`
    alone.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // MTC_DIALECTS_MTP_IR_MTPATTRS_TD

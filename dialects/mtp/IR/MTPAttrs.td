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

    An axis marked `two_chunk` (`[cp = 2 two_chunk]`) cuts a dimension it splits in two
    chunks per coordinate, Megatron's load balancing of causal attention: along an axis of
    size n, the part being split is cut in 2n equal chunks and coordinate c holds chunks c
    and 2n - 1 - c, in that order. Every rank then holds as many early positions as late
    ones. The split's sizes are those of a contiguous split; what changes is which global
    positions a part holds (codegen::lowering::PartPositions).
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "axis names">:$axisNames,
    ArrayRefParameter<"int64_t", "axis sizes">:$axisSizes,
    OptionalArrayRefParameter<"::mlir::StringAttr", "axes cutting in two chunks">:$twoChunkAxes
  );
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<::mlir::StringAttr>":$axisNames,
                     "::llvm::ArrayRef<int64_t>":$axisSizes), [{
      return $_get($_ctxt, axisNames, axisSizes, ::llvm::ArrayRef<::mlir::StringAttr>());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The size of axis `name`, if the mesh has it.
    std::optional<int64_t> getAxisSize(::llvm::StringRef name) const;
    /// Devices in the mesh (the product of the sizes).
    int64_t getNumDevices() const;
    /// Whether axis `name` cuts what it splits in two chunks per coordinate.
    bool isTwoChunk(::llvm::StringRef name) const;
    /// The equal pieces axis `name` cuts a dimension into: its size, twice that for a
    /// two_chunk axis (two chunks per coordinate). The axis must be on the mesh.
    int64_t getPieces(::llvm::StringRef name) const;
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

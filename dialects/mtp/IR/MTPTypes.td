//===- MTPTypes.td - mtp dialect types ----------------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPTYPES_TD
#define MTC_DIALECTS_MTP_IR_MTPTYPES_TD

include "dialects/mtp/IR/MTPAttrs.td"

def MTP_ShardedTensorType : TypeDef<MTP_Dialect, "ShardedTensor"> {
  let mnemonic = "tensor";
  let summary = "one rank's part of a named-dimension tensor laid out on a mesh";
  let description = [{
    ```
    !mtp.tensor<[batch=8, seq=64, heads=4], f32, <[dp = 2, tp = 2]>,
                split {batch = [dp], heads = [tp]}, partial [tp]>
    ```
    The global tensor (`[batch=8, seq=64, heads=4], f32`), the mesh, the axes that split
    each dimension (outermost first: `seq = [cp, tp]` splits `seq` over `cp`, then each
    part over `tp`), and the axes over which the local values are partial sums. A rank
    holds `size / product of its axes` of a split dimension (the local type); the other
    axes replicate it. `split {}` and `partial []` are omitted when empty.

    Checked: the split dimensions exist, each axis exists in the mesh and is used at most
    once per tensor (by one dimension or as a partial axis), and every split dimension's
    size is divisible by the product of its axes' sizes.
  }];
  let parameters = (ins
    "::mtc::mt::NamedTensorType":$global,
    "::mtc::mtp::MeshAttr":$mesh,
    "::mlir::DictionaryAttr":$split,
    "::mlir::ArrayAttr":$partial
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes splitting dimension `dim`, outermost first (empty: not split).
    ::llvm::SmallVector<::llvm::StringRef> getSplitAxes(::llvm::StringRef dim) const;
    /// Whether the local values are partial sums over `axis`.
    bool isPartialOver(::llvm::StringRef axis) const;
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// The tensor one rank holds: every split dimension divided by its axes' sizes.
    ::mtc::mt::NamedTensorType getLocalType() const;
    /// This type with `dim` split over `axes` (replacing its split; empty: not split).
    ShardedTensorType withSplit(::llvm::StringRef dim,
                                ::llvm::ArrayRef<::llvm::StringRef> axes) const;
    /// This type with partial axes `axes`.
    ShardedTensorType withPartial(::llvm::ArrayRef<::llvm::StringRef> axes) const;
  }];
}

#endif // MTC_DIALECTS_MTP_IR_MTPTYPES_TD

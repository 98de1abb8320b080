//===- MTTypes.td - mt dialect types ------------------------*- tablegen -*-===//

#ifndef MTC_DIALECTS_MT_IR_MTTYPES_TD
#define MTC_DIALECTS_MT_IR_MTTYPES_TD

include "dialects/mt/IR/MTBase.td"

class MT_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<MT_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def MT_TensorType : MT_Type<"NamedTensor", "tensor"> {
  let summary = "tensor with named dimensions";
  let description = [{
    A dense tensor whose dimensions each have a name and a static size, in a physical order:
    `!mt.tensor<[batch=4, seq=256, hidden=768], f32>`. A scalar is `!mt.tensor<[], f32>`.
    Names are unique within one type.
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "dimension names">:$dimNames,
    ArrayRefParameter<"int64_t", "dimension sizes">:$dimSizes,
    "::mlir::Type":$elementType
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::llvm::ArrayRef<::mtc::mt::NamedDim>":$dims,
                                        "::mlir::Type":$elementType)>,
  ];
  let extraClassDeclaration = [{
    static NamedTensorType get(::mlir::MLIRContext *ctx,
                          ::llvm::ArrayRef<::mlir::StringAttr> names,
                          ::llvm::ArrayRef<int64_t> sizes, ::mlir::Type elementType);
    static NamedTensorType getChecked(::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
                                 ::mlir::MLIRContext *ctx,
                                 ::llvm::ArrayRef<::mlir::StringAttr> names,
                                 ::llvm::ArrayRef<int64_t> sizes, ::mlir::Type elementType);
    static NamedTensorType getScalar(::mlir::Type elementType);

    unsigned getRank() const { return getDimNames().size(); }
    ::llvm::SmallVector<::mtc::mt::NamedDim> getDims() const;
    /// Position of the dimension called `name`, if present.
    std::optional<unsigned> getDimIndex(::llvm::StringRef name) const;
    bool hasDim(::llvm::StringRef name) const { return getDimIndex(name).has_value(); }
    /// Size of the dimension called `name`; the dimension must exist.
    int64_t getDimSize(::llvm::StringRef name) const;
    int64_t getNumElements() const;
    NamedTensorType withElementType(::mlir::Type elementType) const;
    NamedTensorType withDims(::llvm::ArrayRef<::mtc::mt::NamedDim> dims) const;
    /// Printable `[a=1, b=2]` of the dimensions, for diagnostics.
    std::string dimsToString() const;
  }];
}

#endif // MTC_DIALECTS_MT_IR_MTTYPES_TD

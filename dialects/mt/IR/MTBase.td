//===- MTBase.td - mt dialect definition --------------------*- tablegen -*-===//
//
// `mt` is the global-graph dialect: the whole model as one program over tensors whose
// dimensions carry names. Sharding, pipelining and codegen all start from here.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_IR_MTBASE_TD
#define MTC_DIALECTS_MT_IR_MTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def MT_Dialect : Dialect {
  let name = "mt";
  let cppNamespace = "::mtc::mt";
  let summary = "Global transformer graph over named-dimension tensors";
  let description = [{
    Every tensor dimension has a name (`batch`, `seq`, `hidden`, ...). Ops refer to
    dimensions by name (`contract ... over [hidden]`), dimensions of one name agree in size
    across a program, and a parallel strategy is a map from dimension names to mesh axes.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // `mt.train` and `mt.parallel` must hold the dialect's typed settings (MTConfigAttrs.td).
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Module attribute names.
    static constexpr ::llvm::StringLiteral kDimsAttrName = "mt.dims";
    static constexpr ::llvm::StringLiteral kTrainAttrName = "mt.train";
    static constexpr ::llvm::StringLiteral kParallelAttrName = "mt.parallel";
    /// Unit attribute on the `func.func` of a layer body (called by `mt.repeat`).
    static constexpr ::llvm::StringLiteral kLayerAttrName = "mt.layer";
    /// Unit attribute the optimizer puts on the `mt.param`s it applies weight decay to.
    static constexpr ::llvm::StringLiteral kWeightDecayAttrName = "mt.weight_decay";
    /// Symbol attribute on functions derived from a layer body (its forward with saved
    /// activations, its backward): they read the same parameter instances.
    static constexpr ::llvm::StringLiteral kLayerOfAttrName = "mt.layer_of";
    /// The layer whose parameter instances `func` reads, if any.
    static std::optional<::llvm::StringRef> getLayerOf(::mlir::func::FuncOp func);
  private:
    void registerTypes();
    void registerAttributes();
  public:
  }];
}

#endif // MTC_DIALECTS_MT_IR_MTBASE_TD

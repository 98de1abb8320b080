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
    /// The dimension that stacks a layer parameter's instances (`[layers=n, ...]`).
    static constexpr ::llvm::StringLiteral kLayersDimName = "layers";
    /// The dimension of a micro-batch's samples (the data's leading dimension): dropout
    /// keys its masks on the global sample along it (runtime/exec/DropoutKey.h).
    static constexpr ::llvm::StringLiteral kBatchDimName = "batch";
    /// The training step's functions: the parameters, in order, whose gradients a step
    /// function returns or an optimizer step takes (`mt.grads`, on the function), and the
    /// parameter of one gradient argument or result (`mt.grad`).
    static constexpr ::llvm::StringLiteral kGradsAttrName = "mt.grads";
    static constexpr ::llvm::StringLiteral kGradAttrName = "mt.grad";
    /// Pipeline functions (compiler/pipeline/): what a buffer argument or result is
    /// (`mt.buffer`: "activation", "residual", ...; `mt.index` of a residual or stash entry),
    /// the chunk or stage a function belongs to, a chunk's [first, count] layers, the first
    /// layer instance of a chunk's repeat, and the module's cut (`mt.pipeline`).
    static constexpr ::llvm::StringLiteral kBufferAttrName = "mt.buffer";
    static constexpr ::llvm::StringLiteral kIndexAttrName = "mt.index";
    static constexpr ::llvm::StringLiteral kPipelineChunkAttrName = "mt.pipeline_chunk";
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName = "mt.pipeline_stage";
    static constexpr ::llvm::StringLiteral kChunkLayersAttrName = "mt.chunk_layers";
    static constexpr ::llvm::StringLiteral kFirstInstanceAttrName = "mt.first_instance";
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "mt.pipeline";
    /// The names of the entry functions' data arguments, in order (the plan's `inputs`): the
    /// token ids, the labels and, with mt-loss-mask, the loss mask.
    static constexpr ::llvm::StringLiteral kEntryInputNames[] = {"tokens", "labels",
                                                                  "loss_mask"};
    /// The layer whose parameter instances `func` reads, if any.
    static std::optional<::llvm::StringRef> getLayerOf(::mlir::func::FuncOp func);
  private:
    void registerTypes();
    void registerAttributes();
  public:
  }];
}

#endif // MTC_DIALECTS_MT_IR_MTBASE_TD

//===- MTConfigAttrs.td - train {} / parallel {} settings ---*- tablegen -*-===//
//
// The training and parallelism settings a model is compiled with, as the module attributes
// `mt.train` and `mt.parallel`. Every field is optional: an absent field keeps the default
// the stage reading it documents, and the plan records the fields that were given. The
// printed forms read like the DSL's blocks:
//
//   #mt.train<optimizer = adamw(lr = 3.0e-04, betas = (0.9, 0.95)), global_batch = 16>
//   #mt.parallel<tp = 2, pp = 2, schedule = "zb-h1", pipeline_layers = [3, 1]>
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_IR_MTCONFIGATTRS_TD
#define MTC_DIALECTS_MT_IR_MTCONFIGATTRS_TD

include "dialects/mt/IR/MTBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def MT_OptimizerKind : I32EnumAttr<"OptimizerKind", "optimizer", [
    I32EnumAttrCase<"AdamW", 0, "adamw">,
    I32EnumAttrCase<"SGD", 1, "sgd">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_LrScheduleKind : I32EnumAttr<"LrScheduleKind", "learning-rate schedule", [
    I32EnumAttrCase<"Constant", 0, "constant">,
    I32EnumAttrCase<"Cosine", 1, "cosine">,
    I32EnumAttrCase<"Linear", 2, "linear">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_Precision : I32EnumAttr<"Precision", "element type of parameters and activations", [
    I32EnumAttrCase<"FP32", 0, "fp32">,
    I32EnumAttrCase<"BF16", 1, "bf16">,
    I32EnumAttrCase<"FP16", 2, "fp16">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_PipelineSchedule : I32EnumAttr<"PipelineSchedule", "pipeline schedule", [
    I32EnumAttrCase<"GPipe", 0, "gpipe">,
    I32EnumAttrCase<"OneFOneB", 1, "1f1b">,
    I32EnumAttrCase<"Interleaved", 2, "interleaved">,
    I32EnumAttrCase<"ZeroBubbleH1", 3, "zb-h1">,
    I32EnumAttrCase<"ZeroBubbleV", 4, "zb-v">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_ContextParallelCommType
    : I32EnumAttr<"ContextParallelCommType", "context-parallel communication type", [
    I32EnumAttrCase<"AllGather", 0, "all_gather">,
    I32EnumAttrCase<"P2P", 1, "p2p">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

def MT_RecomputePolicy : I32EnumAttr<"RecomputePolicy", "activation recomputation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Selective", 1, "selective">,
    I32EnumAttrCase<"Full", 2, "full">,
  ]> {
  let cppNamespace = "::mtc::mt";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// train {}
//===----------------------------------------------------------------------===//

def MT_OptimizerAttr : AttrDef<MT_Dialect, "Optimizer"> {
  let mnemonic = "optimizer";
  let summary = "the optimizer and its hyper-parameters";
  let description = [{
    `adamw(lr, betas, eps, weight_decay)` or `sgd(lr, momentum, weight_decay)`; each
    argument is optional (absent: the optimizer step's default).

    ```mlir
    #mt.optimizer<adamw(lr = 3.0e-04, betas = (0.9, 0.95), weight_decay = 0.1)>
    ```
  }];
  let parameters = (ins EnumParameter<MT_OptimizerKind>:$kind,
                        OptionalParameter<"::mlir::FloatAttr", "learning rate">:$lr,
                        OptionalParameter<"::mlir::DenseF64ArrayAttr", "AdamW (beta1, beta2)">:$betas,
                        OptionalParameter<"::mlir::FloatAttr", "AdamW epsilon">:$eps,
                        OptionalParameter<"::mlir::FloatAttr", "decoupled weight decay">:$weight_decay,
                        OptionalParameter<"::mlir::FloatAttr", "SGD momentum">:$momentum);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def MT_LrScheduleAttr : AttrDef<MT_Dialect, "LrSchedule"> {
  let mnemonic = "lr_schedule";
  let summary = "the learning-rate schedule";
  let description = [{
    `constant(warmup)`, `cosine(warmup, min, decay_steps)` or `linear(warmup, min,
    decay_steps)`; each argument is optional.

    ```mlir
    #mt.lr_schedule<cosine(warmup = 100, min = 3.0e-05)>
    ```
  }];
  let parameters = (ins EnumParameter<MT_LrScheduleKind>:$kind,
                        OptionalParameter<"std::optional<int64_t>", "linear warm-up steps">:$warmup,
                        OptionalParameter<"::mlir::FloatAttr", "final learning rate">:$min,
                        OptionalParameter<"std::optional<int64_t>", "steps to decay over (default: train steps)">:$decay_steps);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def MT_TrainAttr : AttrDef<MT_Dialect, "Train"> {
  let mnemonic = "train";
  let summary = "the `train {}` settings (module attribute `mt.train`)";
  let description = [{
    The optimizer, learning-rate schedule, batch sizes, gradient clipping, precision, seed,
    step count, dropout switch and loss masking (`eod_mask_loss`, Megatron's
    `--eod-mask-loss`: the loss leaves out the positions whose token is an end of document;
    mt-loss-mask) a model trains with. Fields are printed in a fixed order; absent ones are
    left out.

    ```mlir
    module attributes {mt.train = #mt.train<optimizer = adamw(lr = 1.0e-03),
        lr = cosine(warmup = 10), global_batch = 16, micro_batch = 8, precision = fp32>}
    ```
  }];
  let parameters = (ins OptionalParameter<"::mtc::mt::OptimizerAttr", "the optimizer (default: adamw)">:$optimizer,
                        OptionalParameter<"::mtc::mt::LrScheduleAttr", "the learning-rate schedule (default: constant)">:$lr,
                        OptionalParameter<"std::optional<int64_t>", "sequences per step">:$global_batch,
                        OptionalParameter<"std::optional<int64_t>", "sequences per micro-batch (the batch dimension)">:$micro_batch,
                        OptionalParameter<"::mlir::FloatAttr", "global gradient-norm clip (0: none)">:$clip_grad,
                        OptionalParameter<"std::optional<::mtc::mt::Precision>", "element type of parameters and activations (default: fp32)">:$precision,
                        OptionalParameter<"std::optional<int64_t>", "seed of initialisation and dropout">:$seed,
                        OptionalParameter<"std::optional<int64_t>", "training steps">:$steps,
                        OptionalParameter<"std::optional<bool>", "dropout switch (default: on)">:$dropout,
                        OptionalParameter<"std::optional<bool>", "mask the loss at end-of-document tokens (default: off)">:$eod_mask_loss);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute on `module`, or null.
    static TrainAttr lookup(::mlir::ModuleOp module);
    /// The precision, fp32 unless set.
    Precision getPrecisionOrDefault() const {
      return getPrecision().value_or(Precision::FP32);
    }
    /// Whether the loss is masked at end-of-document tokens (off unless set).
    bool masksLossAtEndOfDocument() const { return getEodMaskLoss().value_or(false); }
  }];
}

//===----------------------------------------------------------------------===//
// parallel {}
//===----------------------------------------------------------------------===//

def MT_ParallelAttr : AttrDef<MT_Dialect, "Parallel"> {
  let mnemonic = "parallel";
  let summary = "the `parallel {}` settings (module attribute `mt.parallel`)";
  let description = [{
    Degrees of the mesh axes (`tp`, `pp`, `dp`, `cp`, `ep`; absent: 1), the expert weights'
    tensor-parallel degree (`etp`; absent: `tp`), sequence parallelism, the pipeline schedule and its virtual stages, micro-batches per step,
    the recompute policy, the distributed optimizer, a layout (dimension -> mesh axis;
    absent: Megatron's), an explicit split of the layers into pipeline chunks and how
    context-parallel attention exchanges keys and values (`cp_comm_type`: `all_gather`,
    the default, or `p2p`, ring attention).

    `pipeline_layers` lists the layers of each model chunk in model order: with `pp` stages
    and `v` virtual stages there are `pp * v` chunks, chunk `c` on stage `c mod pp`
    (Megatron's interleaved assignment); the entries sum to the model's layer count (the
    `mt.repeat` counts of `@forward`). Absent, the layers split evenly.
    `#mt.parallel<auto>` asks for a searched strategy and holds no other field.

    ```mlir
    module attributes {mt.parallel = #mt.parallel<tp = 2, pp = 2, sp = true,
        schedule = "interleaved", virtual_stages = 2, layout = {heads: tp, ffn: tp},
        pipeline_layers = [2, 1, 2, 1]>}
    ```
  }];
  let parameters = (ins DefaultValuedParameter<"bool", "false", "a searched strategy (`parallel auto`)">:$auto_search,
                        OptionalParameter<"std::optional<int64_t>", "tensor-parallel degree">:$tp,
                        OptionalParameter<"std::optional<int64_t>", "pipeline stages">:$pp,
                        OptionalParameter<"std::optional<int64_t>", "data-parallel degree (default: from the world size)">:$dp,
                        OptionalParameter<"std::optional<int64_t>", "context-parallel degree">:$cp,
                        OptionalParameter<"std::optional<int64_t>", "expert-parallel degree">:$ep,
                        OptionalParameter<"std::optional<int64_t>", "tensor-parallel degree of the expert weights (default: tp)">:$etp,
                        OptionalParameter<"std::optional<bool>", "sequence parallelism over tp">:$sp,
                        OptionalParameter<"std::optional<::mtc::mt::PipelineSchedule>", "pipeline schedule (default: 1f1b, interleaved with virtual stages)">:$schedule,
                        OptionalParameter<"std::optional<int64_t>", "model chunks per pipeline stage (`vpp`)">:$virtual_stages,
                        OptionalParameter<"std::optional<int64_t>", "micro-batches per step">:$micro_batches,
                        OptionalParameter<"std::optional<::mtc::mt::RecomputePolicy>", "activation recomputation (default: none)">:$recompute,
                        OptionalParameter<"std::optional<bool>", "optimizer state sharded over dp">:$distributed_optimizer,
                        OptionalParameter<"::mlir::DictionaryAttr", "dimension -> mesh axis (default: Megatron's)">:$layout,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr", "layers of each model chunk, in model order">:$pipeline_layers,
                        OptionalParameter<"std::optional<::mtc::mt::ContextParallelCommType>", "how context-parallel attention exchanges keys and values (default: all_gather)">:$cp_comm_type);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute on `module`, or null.
    static ParallelAttr lookup(::mlir::ModuleOp module);
    /// No setting (`#mt.parallel<>`), or a searched strategy (`#mt.parallel<auto>`).
    static ParallelAttr get(::mlir::MLIRContext *context, bool autoSearch = false) {
      return get(context, autoSearch, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});
    }

    /// The degree of mesh axis `axis` ("tp", "pp", "dp", "cp" or "ep"; 1 unless set).
    int64_t getDegree(::llvm::StringRef axis) const;
    int64_t getTensorParallel() const { return getTp().value_or(1); }
    int64_t getPipelineParallel() const { return getPp().value_or(1); }
    int64_t getDataParallel() const { return getDp().value_or(1); }
    /// The tensor-parallel degree of the expert weights: `etp`, else `tp`.
    int64_t getExpertTensorParallel() const { return getEtp().value_or(getTensorParallel()); }
    bool isSequenceParallel() const { return getSp().value_or(false); }
    bool usesDistributedOptimizer() const { return getDistributedOptimizer().value_or(false); }
    /// Whether context-parallel attention is ring attention (`cp_comm_type = p2p` with
    /// cp > 1): mt-decompose leaves attention whole for its partition rule.
    bool usesRingAttention() const {
      return getCp().value_or(1) > 1 && getCpCommType() == ContextParallelCommType::P2P;
    }
    /// Model chunks per pipeline stage: `virtual_stages`, else 2 under zb-v (its V
    /// shape), else 1.
    int64_t getNumVirtualStages() const;
    /// The schedule: as set, else interleaved with virtual stages, else 1f1b.
    PipelineSchedule getScheduleOrDefault() const;
    RecomputePolicy getRecomputeOrDefault() const {
      return getRecompute().value_or(RecomputePolicy::None);
    }
    /// The axis `layout` maps dimension `dim` to, if any.
    std::optional<::llvm::StringRef> getLayoutAxis(::llvm::StringRef dim) const;

    /// The layers of each of the `pp * virtual stages` model chunks, in model order (chunk
    /// c on stage c mod pp): `pipeline_layers` when given, else the even split of
    /// `numLayers`. Empty when `numLayers` does not split evenly and no split is given.
    ::llvm::SmallVector<int64_t> getPipelineLayers(int64_t numLayers) const;
  }];
}

#endif // MTC_DIALECTS_MT_IR_MTCONFIGATTRS_TD

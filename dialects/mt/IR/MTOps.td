//===- MTOps.td - mt dialect operations ---------------------*- tablegen -*-===//
//
// Operations of the global graph. Every op names the dimensions it works on; verifiers
// check those names exist with consistent sizes and that the declared result type is the
// one the op implies, so a malformed program is rejected at the op that breaks it. Ops
// whose result type follows from their operands and attributes infer it
// (InferTypeOpAdaptor), so builders need no result type; the others (a chosen order, size
// or element type: transpose, broadcast, split, cast, topk, ...) take it explicitly.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_IR_MTOPS_TD
#define MTC_DIALECTS_MT_IR_MTOPS_TD

include "dialects/mt/IR/MTBase.td"
include "dialects/mt/IR/MTTypes.td"
include "dialects/mt/IR/MTAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"

/// Ops with no operands and one value per call of their function (MTOps.h).
def MT_CallConstant : NativeOpTrait<"CallConstant"> {
  let cppNamespace = "::mtc::mt::OpTrait";
}

class MT_Op<string mnemonic, list<Trait> traits = []>
    : Op<MT_Dialect, mnemonic, traits>;

def MT_Tensor : Type<CPred<"::llvm::isa<::mtc::mt::NamedTensorType>($_self)">,
                     "named-dimension tensor", "::mtc::mt::NamedTensorType">;

/// A list of dimension names, printed as `[a, b]`.
def MT_DimListAttr : TypedArrayAttrBase<StrAttr, "list of dimension names"> {
  let constBuilderCall = "$_builder.getStrArrayAttr($0)";
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def MT_ParamOp : MT_Op<"param",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a trainable parameter";
  let description = [{
    Declares a parameter of the model. A parameter that belongs to a layer names it with
    `layer @block` (a `func.func` marked `mt.layer`): the layer's `mt.repeat` instantiates it once per repeat, so its true
    size is its type's size times the repeat count.

    ```mlir
    mt.param @wte : !mt.tensor<[vocab=512, hidden=64], f32> init normal(0.02)
    mt.param @block.ln1.g layer @block : !mt.tensor<[hidden=64], f32> init ones
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<FlatSymbolRefAttr>:$layer,
                       TypeAttrOf<MT_Tensor>:$type,
                       MT_InitAttr:$init);
  let assemblyFormat = [{
    $sym_name (`layer` $layer^)? `:` $type `init` custom<InitValue>($init) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mtc::mt::NamedTensorType getTensorType() {
      return ::llvm::cast<::mtc::mt::NamedTensorType>(getType());
    }
  }];
}

/// Parameters and optimizer state: reads and writes of them are ordered.
def MT_ParameterResource : Resource<"::mtc::mt::ParameterResource">;

def MT_ParamRefOp : MT_Op<"param_ref",
    [MemoryEffects<[MemRead<MT_ParameterResource>]>,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the value of a parameter or of optimizer state";
  let description = [{
    Reads an `mt.param` or an `mt.state`. Inside a layer body (or a function derived from
    it, marked `mt.layer_of`) a layer parameter reads the current repeat's instance;
    elsewhere a layer parameter (and its state) reads all instances, stacked along a
    leading `layers` dimension.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def MT_StateOp : MT_Op<"state",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "optimizer state of a parameter";
  let description = [{
    A tensor the optimizer keeps between steps for parameter `of` (Adam's first and second
    moments, SGD's momentum), with the parameter's storage type (stacked for layer
    parameters: its type with a leading `layers` dimension) and initialised to zero.

    ```mlir
    mt.state @wte.exp_avg of @wte : !mt.tensor<[vocab=256, hidden=64], f32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$of,
                       TypeAttrOf<MT_Tensor>:$type);
  let assemblyFormat = "$sym_name `of` $of `:` $type attr-dict";
}

def MT_AssignOp : MT_Op<"assign", [MemoryEffects<[MemWrite<MT_ParameterResource>]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "overwrite a parameter or optimizer state";
  let description = [{
    Stores `value` into the `mt.param` or `mt.state` named `target` (all instances of a
    layer parameter, stacked, outside the layer). The optimizer step is made of these.
  }];
  let arguments = (ins FlatSymbolRefAttr:$target, MT_Tensor:$value);
  let assemblyFormat = "$target `,` $value attr-dict `:` type($value)";
}

def MT_ConstantOp : MT_Op<"constant", [Pure, MT_CallConstant]> {
  let summary = "a scalar constant";
  let description = [{
    A scalar (rank 0) value; named broadcasting lets it combine with any tensor.
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_LossScaleOp : MT_Op<"loss_scale", [Pure, MT_CallConstant, InferTypeOpAdaptor]> {
  let summary = "the loss scale of the step being computed";
  let description = [{
    The factor an fp16 step multiplies its loss by before differentiating it (dynamic loss
    scaling): an f32 scalar the runtime chooses per step and passes with each call
    (`mtc_loss_scale`, runtime/exec/KernelABI.h), 1 where no scale is given. mt-autodiff
    seeds the backward with it under `precision fp16`, so every gradient comes out scaled
    and the optimizer step divides it out. Like `mt.constant` it has no operands and no
    gradient, and it is the same value everywhere in one call, so it is pure.

    ```mlir
    %s = mt.loss_scale : !mt.tensor<[], f32>
    ```
  }];
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def MT_IotaOp : MT_Op<"iota", [Pure, MT_CallConstant]> {
  let summary = "the positions 0, 1, ... along a dimension";
  let description = [{
    A tensor with the one dimension `dim` whose element i is i: the positions of a
    sequence (mt-decompose builds the causal mask from them). Like `mt.constant` it has no
    operands and no gradient. The element type is floating-point or integer (not i1), and
    every position must be exact in it: up to 2^p for a float of p significand bits (256
    for bf16, 2048 for f16, 2^24 for f32), up to the largest signed value for an integer.

    ```mlir
    %p = mt.iota dim seq : !mt.tensor<[seq=8], f32>
    ```
  }];
  let arguments = (ins StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "`dim` custom<DimName>($dim) attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `elementType` (floating-point or integer other than i1) holds each of the
    /// positions 0 .. size - 1 exactly.
    static bool holdsPositions(::mlir::Type elementType, int64_t size);
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class MT_BinaryOp<string mnemonic> : MT_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let description = [{
    Elementwise with named broadcasting: the result has the lhs dimensions in order followed
    by the rhs dimensions that the lhs lacks; dimensions of one name agree in size; element
    types are equal. The result type is inferred, and must be exactly that one (order
    included): a producer that wants another order follows with `mt.transpose`, so the
    lowerings never see a permuted elementwise result.
  }];
  let arguments = (ins MT_Tensor:$lhs, MT_Tensor:$rhs);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

/// The identities `x + 0`, `x - 0`, `x * 1` and `x / 1` (the 0 or 1 an `mt.constant`) fold
/// to `x` where `x` already has the result type (the constant adds no dimension). Adding 0
/// turns -0 into +0 under IEEE rules; a training graph never tells the two apart.
class MT_IdentityFoldingBinaryOp<string mnemonic> : MT_BinaryOp<mnemonic> {
  let hasFolder = 1;
}

def MT_AddOp : MT_IdentityFoldingBinaryOp<"add"> { let summary = "elementwise sum"; }
def MT_SubOp : MT_IdentityFoldingBinaryOp<"sub"> { let summary = "elementwise difference"; }
def MT_MulOp : MT_IdentityFoldingBinaryOp<"mul"> { let summary = "elementwise product"; }
def MT_DivOp : MT_IdentityFoldingBinaryOp<"div"> { let summary = "elementwise quotient"; }
def MT_MaxOp : MT_BinaryOp<"max"> { let summary = "elementwise maximum"; }
def MT_PowOp : MT_BinaryOp<"pow"> { let summary = "elementwise power"; }

class MT_UnaryOp<string mnemonic, list<Trait> traits = []>
    : MT_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_NegOp : MT_UnaryOp<"neg"> { let summary = "elementwise negation"; }
def MT_ExpOp : MT_UnaryOp<"exp"> { let summary = "elementwise e^x"; }
def MT_LogOp : MT_UnaryOp<"log"> { let summary = "elementwise natural logarithm"; }
def MT_SqrtOp : MT_UnaryOp<"sqrt"> { let summary = "elementwise square root"; }
def MT_RsqrtOp : MT_UnaryOp<"rsqrt"> { let summary = "elementwise 1/sqrt(x)"; }
def MT_TanhOp : MT_UnaryOp<"tanh"> { let summary = "elementwise hyperbolic tangent"; }
def MT_SigmoidOp : MT_UnaryOp<"sigmoid"> { let summary = "elementwise logistic sigmoid"; }
def MT_CosOp : MT_UnaryOp<"cos"> { let summary = "elementwise cosine"; }
def MT_ReluOp : MT_UnaryOp<"relu"> { let summary = "elementwise max(x, 0)"; }
def MT_SiluOp : MT_UnaryOp<"silu"> { let summary = "elementwise x * sigmoid(x)"; }
def MT_GeluOp : MT_UnaryOp<"gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)`; with `approximate` (GPT-2's form) Phi is replaced by the tanh
    approximation `0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins MT_Tensor:$input, UnitAttr:$approximate);
  let assemblyFormat = "$input (`approximate` $approximate^)? attr-dict `:` type($result)";
}

def MT_CastOp : MT_Op<"cast", [Pure]> {
  let summary = "element type conversion";
  let description = [{
    Converts the element type; the dimensions are unchanged. A cast to the operand's own
    type folds away.
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MT_TransposeOp : MT_Op<"transpose", [Pure]> {
  let summary = "reorder dimensions";
  let description = [{
    Changes the physical order of the dimensions; names, sizes and element type stay.
    Folds: a transpose to the operand's own order is the operand, and a transpose of a
    transpose is one transpose from the first operand.
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

def MT_ContractOp : MT_Op<"contract", [Pure, InferTypeOpAdaptor]> {
  let summary = "contraction over named dimensions";
  let description = [{
    Multiplies and sums over the `over` dimensions, which both operands have. Dimensions
    that both operands have and that are not contracted are batch dimensions. The result has
    the lhs's remaining dimensions in order, then the rhs's remaining dimensions the lhs
    lacks; it is inferred, and must be exactly that type.

    ```mlir
    %q = mt.contract %h, %wq over [hidden]
        : !mt.tensor<[batch=2, seq=8, hidden=64], f32>,
          !mt.tensor<[hidden=64, heads=4, head_dim=16], f32>
        -> !mt.tensor<[batch=2, seq=8, heads=4, head_dim=16], f32>
    ```
  }];
  let arguments = (ins MT_Tensor:$lhs, MT_Tensor:$rhs, MT_DimListAttr:$over);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `over` custom<DimList>($over) attr-dict `:` type($lhs) `,` type($rhs)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

class MT_ReduceOp<string mnemonic> : MT_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let description = [{
    Reduces the `over` dimensions away; the others keep their order (the inferred result
    type). Reducing over no dimension is the identity, and folds away.
  }];
  let hasFolder = 1;
  let arguments = (ins MT_Tensor:$input, MT_DimListAttr:$over);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `over` custom<DimList>($over) attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_ReduceSumOp : MT_ReduceOp<"reduce_sum"> { let summary = "sum over dimensions"; }
def MT_ReduceMeanOp : MT_ReduceOp<"reduce_mean"> { let summary = "mean over dimensions"; }
def MT_ReduceMaxOp : MT_ReduceOp<"reduce_max"> { let summary = "maximum over dimensions"; }

//===----------------------------------------------------------------------===//
// Normalisation and attention
//===----------------------------------------------------------------------===//

def MT_SoftmaxOp : MT_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one dimension";
  let arguments = (ins MT_Tensor:$input, StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input `over` custom<DimName>($dim) attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_LayerNormOp : MT_Op<"layer_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "layer normalisation along one dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * scale (+ bias)` along `dim`; `scale` and `bias` have
    exactly that one dimension. The result has the input's type.
  }];
  let arguments = (ins MT_Tensor:$input, MT_Tensor:$scale, Optional<MT_Tensor>:$bias,
                       StrAttr:$dim, DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? `over` custom<DimName>($dim) attr-dict `:`
    type($input) `,` type($scale) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_RMSNormOp : MT_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalisation along one dimension";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * scale` along `dim`; the result has the input's type.
  }];
  let arguments = (ins MT_Tensor:$input, MT_Tensor:$scale, StrAttr:$dim,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `over` custom<DimName>($dim) attr-dict `:`
    type($input) `,` type($scale) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_RopeOp : MT_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates the pairs (2i, 2i+1) of dimension `dim` by the angle
    `position * theta^(-2i/size(dim))`, where `position` is the index along the dimension
    `position`, or, with `positions`, the value of that integer tensor at the element (its
    dimensions are the position dimension and some of the input's others, such as the
    batch: the positions of documents packed into one sample, which restart at each
    document). With `inverse` the rotation is by the negated angle (the adjoint, used by
    the backward).

    ```mlir
    %r = mt.rope %q over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=8], i32>
        : !mt.tensor<[batch=2, seq=8, heads=4, head_dim=16], f32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input, StrAttr:$dim, StrAttr:$position,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta, UnitAttr:$inverse,
                       Optional<MT_Tensor>:$positions);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `over` custom<DimName>($dim) `position` custom<DimName>($position)
    (`at` $positions^ `:` type($positions))? (`inverse` $inverse^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def MT_AttentionOp : MT_Op<"attention", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "scaled dot-product attention (multi-head and grouped-query)";
  let description = [{
    `softmax(q k^T * scale [+ causal mask]) v` per head. The query has dimensions
    (`seq`, `heads`, `head_dim`) plus batch dimensions; key and value have (`seq`,
    `kv_heads`, `head_dim`) and the same batch dimensions. `heads` is a multiple of
    `kv_heads` (grouped-query attention: `kv_heads` is a dimension the query lacks; equal
    names mean ordinary multi-head attention, and then the head counts are equal). `seq`,
    `heads` and `head_dim` are three different dimensions. The result has the query's type.

    With `save_lse` a second result `lse` holds the log-sum-exp of every query row's
    scores (the query's type without `head_dim`), which `mt.attention_grad` takes back
    instead of recomputing it: autodiff asks for it under ring attention, where recomputing
    costs a second ring of key/value exchanges.

    With `positions` (causal only; integer, dimensions among the query's that include `seq`
    and neither head dimension: the position ids mt-reset-documents takes as an input for
    Megatron's `--reset-attention-mask`) attention stays within documents: key j is
    visible to query i iff j <= i and i - j <= positions[i], the position ids counting from
    0 at each document's first token. The key positions are the query's (equal lengths).

    ```mlir
    %o = mt.attention %q, %k, %v dims(seq, heads, kv_heads, head_dim) causal scale 0.125
        : !mt.tensor<...>, !mt.tensor<...>, !mt.tensor<...>
    ```
  }];
  let arguments = (ins MT_Tensor:$query, MT_Tensor:$key, MT_Tensor:$value,
                       Optional<MT_Tensor>:$positions,
                       StrAttr:$seq_dim, StrAttr:$heads_dim, StrAttr:$kv_heads_dim,
                       StrAttr:$head_dim, UnitAttr:$causal, F64Attr:$scale,
                       UnitAttr:$save_lse);
  let results = (outs MT_Tensor:$result, Optional<MT_Tensor>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`positions` $positions^)? `dims` `(` custom<DimName>($seq_dim) `,`
    custom<DimName>($heads_dim) `,` custom<DimName>($kv_heads_dim) `,`
    custom<DimName>($head_dim) `)` (`causal` $causal^)? `scale` $scale
    (`save_lse` $save_lse^)? attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`,` type($positions)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mtc::mt::NamedTensorType getResultType() {
      return ::llvm::cast<::mtc::mt::NamedTensorType>(getResult().getType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

def MT_GatherOp : MT_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "embedding lookup";
  let description = [{
    Selects rows of `table` along dimension `dim` by integer `indices`. The result has the
    indices' dimensions followed by the table's other dimensions (the inferred type).
  }];
  let arguments = (ins MT_Tensor:$table, MT_Tensor:$indices, StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $table `,` $indices `over` custom<DimName>($dim) attr-dict `:` type($table) `,`
    type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_CrossEntropyOp : MT_Op<"cross_entropy", [Pure]> {
  let summary = "mean softmax cross-entropy";
  let description = [{
    `mean(logsumexp(logits) - logits[label])` over every position; `labels` has the logits'
    dimensions except `dim` and integer elements. The result is a floating-point scalar
    whose element type the producer chooses (the frontend reports the loss in f32 whatever
    the logits' precision), so it is not inferred.

    With a `mask` (floating point, the labels' dimensions; mt-loss-mask adds it for
    Megatron's `--eod-mask-loss`) the mean is weighted:
    `sum(mask * (logsumexp(logits) - logits[label])) / sum(mask)`, the positions of mask 0
    leaving the loss and its gradient.
  }];
  let arguments = (ins MT_Tensor:$logits, MT_Tensor:$labels, Optional<MT_Tensor>:$mask,
                       StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`mask` $mask^)? `over` custom<DimName>($dim) attr-dict `:`
    type($logits) `,` type($labels) (`,` type($mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_DropoutOp : MT_Op<"dropout", [SameOperandsAndResultType]> {
  let summary = "inverted dropout";
  let description = [{
    Zeroes each element with probability `rate` and scales the rest by 1/(1-rate). The mask
    comes from the counter-based RNG keyed on (seed, `stream`, global element index, step),
    so it is the same under every parallel layout.
  }];
  let arguments = (ins MT_Tensor:$input, F64Attr:$rate, I64Attr:$stream);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input `rate` $rate `stream` $stream attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dimension manipulation
//===----------------------------------------------------------------------===//

def MT_SplitOp : MT_Op<"split", [Pure]> {
  let summary = "split one dimension into several";
  let description = [{
    Replaces `dim` by the `into` dimensions (row-major: the first varies slowest), in its
    place. Their sizes come from the result type (so it is not inferred) and multiply to
    the size of `dim`. Splitting what an `mt.merge` merged, into the same dimensions,
    folds to the merge's operand.
  }];
  let arguments = (ins MT_Tensor:$input, StrAttr:$dim, MT_DimListAttr:$into);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input custom<DimName>($dim) `into` custom<DimList>($into) attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MT_MergeOp : MT_Op<"merge", [Pure, InferTypeOpAdaptor]> {
  let summary = "merge several dimensions into one";
  let description = [{
    Replaces the `dims` (row-major in the listed order) by one dimension `into`, placed where
    the first of them was (the inferred result type). Merging what an `mt.split` split
    folds to the split's operand when that has the merge's result type.
  }];
  let arguments = (ins MT_Tensor:$input, MT_DimListAttr:$dims, StrAttr:$into);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input custom<DimList>($dims) `into` custom<DimName>($into) attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MT_RenameOp : MT_Op<"rename", [Pure, InferTypeOpAdaptor]> {
  let summary = "rename a dimension";
  let description = [{
    The result is the operand with dimension `dim` called `to`, in place (inferred); `to`
    must not name another dimension of the operand. Renaming to the same name is the
    identity, and folds away.
  }];
  let arguments = (ins MT_Tensor:$input, StrAttr:$dim, StrAttr:$to);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input custom<DimName>($dim) `to` custom<DimName>($to) attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

def MT_TopKOp : MT_Op<"topk", [Pure]> {
  let summary = "the k largest entries along a dimension";
  let description = [{
    Returns the `k` largest values of `input` along `dim` (in descending order, ties broken
    toward the lower position, which mt-decompose relies on) and their integer positions; in both results the dimension `k_dim` (whose size is k) replaces
    `dim`.
  }];
  let arguments = (ins MT_Tensor:$input, StrAttr:$dim, StrAttr:$k_dim);
  let results = (outs MT_Tensor:$values, MT_Tensor:$indices);
  let assemblyFormat = [{
    $input `over` custom<DimName>($dim) `k` custom<DimName>($k_dim) attr-dict `:`
    type($input) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def MT_DispatchOp : MT_Op<"dispatch", [Pure]> {
  let summary = "route tokens to expert buffers";
  let description = [{
    `indices` (token dimensions plus `k_dim`) names for each token its experts. Each expert
    takes up to `capacity` tokens (first come, first served in token order; overflow is
    dropped). The result is (`expert_dim`, `capacity_dim`, feature dimensions of `input`),
    where `input` has the token dimensions plus the feature dimensions and
    `capacity = ceil(capacity_factor * tokens * k / experts)`.

    Without `capacity_factor` the routing is dropless: `capacity = tokens`, the most one
    expert can receive when a token names an expert at most once (as mt.topk's indices do),
    so no choice is ever dropped. With static shapes this costs `experts / k` times the
    memory of exact-fit routing (capacity factor 1) for the result and for everything the
    experts compute from it.

    ```mlir
    %d = mt.dispatch %x, %i k topk to experts capacity capacity factor 1.25 : ...
    %d = mt.dispatch %x, %i k topk to experts capacity capacity dropless : ...
    ```
  }];
  let arguments = (ins MT_Tensor:$input, MT_Tensor:$indices, StrAttr:$k_dim,
                       StrAttr:$expert_dim, StrAttr:$capacity_dim,
                       OptionalAttr<F64Attr>:$capacity_factor);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `k` custom<DimName>($k_dim) `to` custom<DimName>($expert_dim)
    `capacity` custom<DimName>($capacity_dim) (`factor` $capacity_factor^):(`dropless`)?
    attr-dict `:` type($input) `,` type($indices) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// True when no capacity factor limits the experts (capacity = tokens).
    bool isDropless() { return !getCapacityFactor(); }
  }];
  let hasVerifier = 1;
}

def MT_ExpertLoadOp : MT_Op<"expert_load", [Pure]> {
  let summary = "how many routing choices name each expert";
  let description = [{
    Counts, for each expert, the routing choices of `indices` (token dimensions plus
    `k_dim`) that name it: the tokens routed to the expert, as Megatron-Core's
    `tokens_per_expert`. The count is taken before any capacity limit: choices an
    `mt.dispatch` with a capacity factor drops are counted, so the counts over the experts
    always add up to tokens * k. The result has the one dimension `expert_dim` and an integer
    element type. Not differentiable: the compiler adds it after autodiff (mt-expert-load,
    for the metrics; mtp-filled-all-to-all, for the slots dropless routing fills).

    ```mlir
    %n = mt.expert_load %i k topk to experts
        : !mt.tensor<[batch=2, seq=4, topk=2], i32> -> !mt.tensor<[experts=8], i64>
    ```
  }];
  let arguments = (ins MT_Tensor:$indices, StrAttr:$k_dim, StrAttr:$expert_dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $indices `k` custom<DimName>($k_dim) `to` custom<DimName>($expert_dim) attr-dict `:`
    type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_CombineOp : MT_Op<"combine", [Pure, InferTypeOpAdaptor]> {
  let summary = "gather expert outputs back to tokens";
  let description = [{
    The inverse of `mt.dispatch` with the same `indices`: each token's output is the sum over
    its k experts of `weights * expert output` (dropped tokens get zero). The result
    (inferred) has the token dimensions of `indices`, then the feature dimensions of
    `input`.
  }];
  let arguments = (ins MT_Tensor:$input, MT_Tensor:$indices, MT_Tensor:$weights,
                       StrAttr:$k_dim, StrAttr:$expert_dim, StrAttr:$capacity_dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` $weights `k` custom<DimName>($k_dim) `from`
    custom<DimName>($expert_dim) `capacity` custom<DimName>($capacity_dim) attr-dict `:`
    type($input) `,` type($indices) `,` type($weights) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_LoadBalancingLossOp : MT_Op<"load_balancing_loss", [Pure, InferTypeOpAdaptor]> {
  let summary = "auxiliary loss that balances expert load";
  let description = [{
    Switch Transformer's `E * sum_e f_e * P_e` over the T tokens routed by `indices` (T
    tokens times k choices): `f_e = count_e / (T * k)` is the fraction of routing choices
    that picked expert e, `P_e = sum_t p[t, e] / T` the mean router probability of expert
    e. The probabilities `p` are the softmax of `logits` over `expert_dim`, or, with
    `probabilities`, the operand itself: the router's scores as Megatron-Core's
    `switch_load_balancing_loss_func` takes them (the softmax, or sigmoid scores normalised
    to sum 1, computed before). A scalar of the logits' element type.
  }];
  let arguments = (ins MT_Tensor:$logits, MT_Tensor:$indices, StrAttr:$expert_dim,
                       StrAttr:$k_dim, UnitAttr:$probabilities);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $indices `over` custom<DimName>($expert_dim) `k` custom<DimName>($k_dim)
    (`probabilities` $probabilities^)? attr-dict `:` type($logits) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def MT_ZLossOp : MT_Op<"z_loss", [Pure, InferTypeOpAdaptor]> {
  let summary = "router z-loss: the mean squared log-partition of the logits";
  let description = [{
    ST-MoE's router z-loss (Megatron's `--moe-z-loss-coeff`): the mean over every position
    (all dimensions but `dim`) of `logsumexp(logits over dim)^2`, with the log-sum-exp in the
    stable form `max + log(sum(exp(logits - max)))`. A scalar of the logits' element type.
    mt-decompose rewrites it (and its gradient, `2 * lse * softmax(logits) * loss_grad /
    positions`, which autodiff writes with the core ops) into the core ops.
  }];
  let arguments = (ins MT_Tensor:$logits, StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $logits `over` custom<DimName>($dim) attr-dict `:` type($logits) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Helpers of the backward pass
//
// Ops that vector-Jacobian products need and the forward graph does not: broadcasting,
// masks, and the fused backward of ops whose gradient is more than a few elementwise steps.
//===----------------------------------------------------------------------===//

def MT_BroadcastOp : MT_Op<"broadcast", [Pure]> {
  let summary = "replicate a tensor along new dimensions";
  let description = [{
    The result has every dimension of the operand (same sizes) plus new ones, in any order;
    each new index repeats the operand's value. The adjoint of `mt.reduce_sum`.
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def MT_GreaterOp : MT_BinaryOp<"greater"> {
  let summary = "elementwise 1.0 where lhs > rhs, else 0.0";
  let description = [{
    A mask in the operands' (floating-point) element type, with named broadcasting as for
    the other binary ops. Used by the gradients of relu, max and reduce_max.
  }];
}

def MT_GeluGradOp : MT_UnaryOp<"gelu_grad"> {
  let summary = "derivative of gelu";
  let description = "d gelu(x) / dx elementwise, for the same `approximate` form.";
  let arguments = (ins MT_Tensor:$input, UnitAttr:$approximate);
  let assemblyFormat = "$input (`approximate` $approximate^)? attr-dict `:` type($result)";
}

def MT_AttentionGradOp : MT_Op<"attention_grad", [Pure, InferTypeOpAdaptor,
    AttrSizedOperandSegments]> {
  let summary = "backward of mt.attention";
  let description = [{
    Given the forward operands and the gradient of the output, returns the gradients of
    query, key and value (the attention probabilities are recomputed, as flash attention's
    backward does). Dimensions and attributes are those of the forward op; the gradients
    have the types of query, key and value. `saved`, when present, is the forward's output
    and its log-sum-exp (`mt.attention ... save_lse`): ring attention's backward then takes
    the softmax statistics from them instead of running the forward's ring again.
    `positions` are the forward's document positions (mt.attention's).
  }];
  let arguments = (ins MT_Tensor:$query, MT_Tensor:$key, MT_Tensor:$value,
                       MT_Tensor:$result_grad, Variadic<MT_Tensor>:$saved,
                       Optional<MT_Tensor>:$positions,
                       StrAttr:$seq_dim, StrAttr:$heads_dim, StrAttr:$kv_heads_dim,
                       StrAttr:$head_dim, UnitAttr:$causal, F64Attr:$scale);
  let results = (outs MT_Tensor:$query_grad, MT_Tensor:$key_grad, MT_Tensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result_grad (`saved` `(` $saved^ `:` type($saved) `)`)?
    (`positions` $positions^ `:` type($positions))?
    `dims` `(` custom<DimName>($seq_dim) `,`
    custom<DimName>($heads_dim) `,` custom<DimName>($kv_heads_dim) `,`
    custom<DimName>($head_dim) `)` (`causal` $causal^)? `scale` $scale attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($result_grad) `->`
    type($query_grad) `,` type($key_grad) `,` type($value_grad)
  }];
  let hasVerifier = 1;
}

def MT_EmbeddingGradOp : MT_Op<"embedding_grad", [Pure]> {
  let summary = "scatter-add: the adjoint of mt.gather";
  let description = [{
    A zero tensor of the table's type into which each row of `grad` is added at the row
    its index selects along `dim`. `grad` has the indices' dimensions followed by the
    table's other dimensions, as `mt.gather` produced.
  }];
  let arguments = (ins MT_Tensor:$indices, MT_Tensor:$grad, StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `over` custom<DimName>($dim) attr-dict `:` type($indices) `,`
    type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_CrossEntropyGradOp : MT_Op<"cross_entropy_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "backward of mt.cross_entropy";
  let description = [{
    `(softmax(logits) - onehot(labels)) * loss_grad / positions`, the gradient of the mean
    cross-entropy with respect to the logits, in the logits' type; with mt.cross_entropy's
    `mask`, `(softmax(logits) - onehot(labels)) * mask * loss_grad / sum(mask)`.
  }];
  let arguments = (ins MT_Tensor:$logits, MT_Tensor:$labels, MT_Tensor:$loss_grad,
                       Optional<MT_Tensor>:$mask, StrAttr:$dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad (`mask` $mask^)? `over` custom<DimName>($dim) attr-dict
    `:` type($logits) `,` type($labels) `,` type($loss_grad) (`,` type($mask)^)? `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def MT_TopKGradOp : MT_Op<"topk_grad", [Pure]> {
  let summary = "backward of mt.topk's values";
  let description = [{
    Scatters the gradient of the top-k values back to the positions `indices` chose along
    `dim` of a zero tensor of the forward input's type (`result`).
  }];
  let arguments = (ins MT_Tensor:$values_grad, MT_Tensor:$indices, StrAttr:$dim,
                       StrAttr:$k_dim);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $values_grad `,` $indices `over` custom<DimName>($dim) `k` custom<DimName>($k_dim)
    attr-dict `:` type($values_grad) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_CombineGradOp : MT_Op<"combine_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "backward of mt.combine";
  let description = [{
    The gradients of `mt.combine`'s expert outputs (each expert slot receives its token's
    output gradient times the routing weight) and of its weights (the dot product of the
    token's output gradient with the expert slot it came from; zero for dropped tokens),
    in the types of the input and the weights.
  }];
  let arguments = (ins MT_Tensor:$input, MT_Tensor:$indices, MT_Tensor:$weights,
                       MT_Tensor:$result_grad, StrAttr:$k_dim, StrAttr:$expert_dim,
                       StrAttr:$capacity_dim);
  let results = (outs MT_Tensor:$input_grad, MT_Tensor:$weights_grad);
  let assemblyFormat = [{
    $input `,` $indices `,` $weights `,` $result_grad `k` custom<DimName>($k_dim) `from`
    custom<DimName>($expert_dim) `capacity` custom<DimName>($capacity_dim) attr-dict `:`
    type($input) `,` type($indices) `,` type($weights) `,` type($result_grad) `->`
    type($input_grad) `,` type($weights_grad)
  }];
  let hasVerifier = 1;
}

def MT_LoadBalancingLossGradOp : MT_Op<"load_balancing_loss_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "backward of mt.load_balancing_loss";
  let description = [{
    The gradient with respect to the router logits (the routing fractions `f_e` are
    piecewise constant and contribute none), in the logits' type. With `probabilities`, the
    gradient with respect to the probabilities the forward op took: `loss_grad * E / T *
    f_e` for every token.
  }];
  let arguments = (ins MT_Tensor:$logits, MT_Tensor:$indices, MT_Tensor:$loss_grad,
                       StrAttr:$expert_dim, StrAttr:$k_dim, UnitAttr:$probabilities);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $indices `,` $loss_grad `over` custom<DimName>($expert_dim) `k`
    custom<DimName>($k_dim) (`probabilities` $probabilities^)? attr-dict `:` type($logits)
    `,` type($indices) `,` type($loss_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

def MT_RepeatOp : MT_Op<"repeat", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "apply a layer function several times (a scan over the layer stack)";
  let description = [{
    Calls `callee` (a `func.func` marked `mt.layer`, or derived from one and marked
    `mt.layer_of`) `count` times; each call uses its own instance of the layer's parameters.
    Layers stay one function however deep the model is.

    The first `carried` operands (all of them when the attribute is absent) are threaded
    through the calls: call i receives what call i-1 returned in the same positions, and the
    op returns the last call's values. The remaining operands are *stacked*: each has the
    dimension `stack_dim` (default `layers`) of size `count`, and call i receives slice i.
    Results past the carried ones are stacked the same way, call i's value at slice i. The
    last `invariant` operands (none when the attribute is absent) are passed unchanged to
    every call: data every layer reads alike, such as the per-token position ids of
    packed documents. They have no results and no gradient. With `reverse`, the calls run
    from instance `count - 1` down to 0 (the backward pass).

    ```mlir
    %y = mt.repeat @block(%x) count 12 : (!mt.tensor<...>) -> !mt.tensor<...>
    %dx, %dw = mt.repeat @block.bwd(%dy, %saved) count 12 {carried = 1 : i64, reverse}
        : (...) -> (...)
    %y = mt.repeat @block(%x, %positions) count 12 {carried = 1 : i64, invariant = 1 : i64}
        : (!mt.tensor<...>, !mt.tensor<...>) -> !mt.tensor<...>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<MT_Tensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$carried,
                       OptionalAttr<StrAttr>:$stack_dim, UnitAttr:$reverse,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$invariant);
  let results = (outs Variadic<MT_Tensor>:$results);
  let assemblyFormat = [{
    $callee `(` $inputs `)` `count` $count attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of leading operands (and results) threaded from call to call.
    unsigned getNumCarried() {
      return getCarried() ? static_cast<unsigned>(*getCarried())
                          : getInputs().size() - getNumInvariant();
    }
    /// Number of trailing operands every call receives unchanged.
    unsigned getNumInvariant() {
      return getInvariant() ? static_cast<unsigned>(*getInvariant()) : 0;
    }
    /// The operands sliced per call (between the carried and the invariant ones).
    ::mlir::OperandRange getStackedInputs() {
      return getInputs().drop_front(getNumCarried()).drop_back(getNumInvariant());
    }
    /// The operands every call receives unchanged.
    ::mlir::OperandRange getInvariantInputs() {
      return getInputs().take_back(getNumInvariant());
    }
    /// Name of the dimension that stacks per-call operands and results.
    ::llvm::StringRef getStackDimName() {
      return getStackDim() ? *getStackDim() : ::llvm::StringRef("layers");
    }
  }];
}

#endif // MTC_DIALECTS_MT_IR_MTOPS_TD

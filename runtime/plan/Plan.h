//===- Plan.h - Loading and verifying a plan directory ----------*- C++ -*-===//
//
// `loadPlan(dir)` reads a plan written by `mtc compile -o model.plan` (docs/plan-format.md,
// version 2):
//
//  1. MANIFEST: the format line `mtc-plan 2`, then one `<sha256> <size> <name>` line per file;
//     every listed file must exist with that size and SHA-256. plan.json must be listed.
//  2. plan.json: parsed (strict JSON) and checked into the structs below: required keys and
//     their types, dtypes, initialisers and their arguments, tensor ids, the `layers`
//     dimension of layer parameters, optimizer state against its parameter.
//
// Every failure is an Error naming the plan directory and what is wrong, e.g.
//   model.plan: plan.json is 1234 bytes, MANIFEST says 2048 (truncated?)
//   model.plan: unsupported plan version 1 (this mtrun reads version 2)
//   model.plan/plan.json: params[3].init.kind: unknown initialiser 'gaussian' (...)
// Keys of plan.json that version 2 does not define are ignored.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_PLAN_H
#define MTC_RUNTIME_PLAN_PLAN_H

#include "runtime/plan/PipelineSchedule.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// The plan format version this runtime reads.
/// Version 2: the compiled step's entry points take the kernel context first
/// (runtime/exec/KernelABI.h); version 1 plans' kernels do not. Version 3: the optimizer
/// functions update the parameters and states they take in place (version 2's returned
/// new copies).
inline constexpr int kPlanFormatVersion = 3;

/// The first word of MANIFEST's first line and plan.json's `format`.
inline constexpr std::string_view kPlanFormatName = "mtc-plan";
/// The name of the loss mask among the step's inputs (Plan::eodMaskLoss).
inline constexpr std::string_view kLossMaskInput = "loss_mask";
/// The name of the position ids among the step's inputs (Plan::resetPositionIds).
inline constexpr std::string_view kPositionIdsInput = "position_ids";
/// The most optimizer steps a run takes (the plan's `train.steps`, mtrun's --steps): steps
/// index the dropout keys with 32 bits.
inline constexpr int64_t kMaxTrainSteps = (int64_t(1) << 31) - 1;

/// Element types of plan tensors: `f32`, `bf16`, `f16`, `f64` for values, `i32` for token ids.
enum class PlanDType { F32, BF16, F16, F64, I32, I64 };

/// "f32", "bf16", ...
std::string_view planDTypeName(PlanDType dtype);
std::optional<PlanDType> parsePlanDType(std::string_view name);
/// Bytes per element.
size_t planDTypeSize(PlanDType dtype);

/// One named dimension: `{"name": "hidden", "size": 64}`.
struct Dim {
  std::string name;
  int64_t size = 0;

  friend bool operator==(const Dim &, const Dim &) = default;
};

/// The product of the sizes (1 for no dimensions). The loader checks that it fits in int64.
int64_t numElements(const std::vector<Dim> &dims);
/// The sizes alone, as a safetensors shape.
std::vector<int64_t> dimSizes(const std::vector<Dim> &dims);
/// "[layers=2, hidden=64]".
std::string formatDims(const std::vector<Dim> &dims);

/// Parameter initialisers (docs/plan-format.md, "Parameters").
enum class InitKind { Zeros, Ones, Normal, Uniform, Constant };

/// "zeros", "ones", "normal", "uniform", "constant".
std::string_view initKindName(InitKind kind);
std::optional<InitKind> parseInitKind(std::string_view name);

/// An initialiser with its arguments, checked by the loader:
///   zeros, ones        no arguments
///   normal             std (>= 0), optional mean (default 0)
///   uniform            low, high (low <= high)
///   constant           value
/// Every argument is finite and within float range.
struct InitSpec {
  InitKind kind = InitKind::Zeros;
  std::vector<double> args;

  /// "normal(0.02)", "zeros", ...
  std::string describe() const;
};

/// One axis of the device mesh the compiled program is partitioned over (plan.json
/// `mesh.axes`, docs/plan-format.md "Mesh and layouts"). Data parallelism is not an axis
/// (the data-parallel degree is world size / product of the axis sizes) unless the mesh names
/// one as its `data_parallel_axis` (the distributed optimizer, Plan::dataParallelAxis).
struct MeshAxis {
  std::string name; // "tp"
  int64_t size = 1;

  friend bool operator==(const MeshAxis &, const MeshAxis &) = default;
};

/// One dimension of a tensor split over mesh axes: the rank with combined coordinate c
/// (c0 * s1 + c1 for axes [a0, a1], outermost first) holds the contiguous index range
/// [c * G / n, (c + 1) * G / n) of the dimension (G its global size, n the product of the
/// axes' sizes).
struct DimSplit {
  size_t dim = 0;           // index into the tensor's dims
  std::vector<size_t> axes; // indices into Plan::mesh, outermost first (non-empty)

  friend bool operator==(const DimSplit &, const DimSplit &) = default;
};

/// How a parameter (and each optimizer state of it) is laid out over the mesh: the dims that
/// are split and over which axes, in dim order. No splits: replicated on every mesh rank.
struct ParamLayout {
  std::vector<DimSplit> splits;

  bool replicated() const { return splits.empty(); }
  friend bool operator==(const ParamLayout &, const ParamLayout &) = default;
};

/// One entry of the parameter table.
struct ParamInfo {
  std::string name;                 // the .mtl name: "wte", "lnf.g", "block.wq"
  std::optional<std::string> layer; // the layer of a layer parameter
  int64_t instances = 1;            // the layer's repeat count (1 for model parameters)
  uint32_t tensorId = 0;            // the index in the table: the Philox stream of its values
  std::vector<Dim> dims;            // stored dims; a layer parameter's lead with `layers`
  PlanDType dtype = PlanDType::F32;
  InitSpec init;
  bool weightDecay = false;
  /// `layout` (absent: replicated). `dims` stay global; a rank holds the block its mesh
  /// coordinates select (runtime/plan/Sharding.h). Never splits over the data-parallel axis.
  ParamLayout layout;
  /// `optimizer_layout` (only with a data-parallel axis, the distributed optimizer): the
  /// layout of the gradient as `optimizer_step` takes it and of every optimizer state of this
  /// parameter: `layout` plus exactly one more dimension split over the data-parallel axis
  /// alone. Absent: the same as `layout` (the state is whole on every data-parallel rank).
  std::optional<ParamLayout> optimizerLayout;
  /// Where the plan's vocabulary is padded (Plan::vocabularyPadded) and this parameter has
  /// it: the index of that dim in `dims` and the vocabulary's real size. Initial values are
  /// then keyed on each element's index in the unpadded tensor, and padded elements are 0
  /// (runtime/plan/ParamInit.h).
  struct Padding {
    size_t dim = 0;
    int64_t realSize = 0;
  };
  std::optional<Padding> padding;

  /// The layout of the optimizer's gradient and of the states: `optimizerLayout`, else
  /// `layout`.
  const ParamLayout &stateLayout() const { return optimizerLayout ? *optimizerLayout : layout; }

  /// Elements of the stored tensor (all instances).
  int64_t numElements() const { return rt::numElements(dims); }
  std::vector<int64_t> shape() const { return dimSizes(dims); }
};

/// One entry of the optimizer state table: zero-initialised, stored like parameter `of`, laid
/// out by that parameter's optimizer layout (Plan::stateLayout).
struct StateInfo {
  std::string name; // "block.wq.exp_avg"
  std::string of;   // the parameter's name
  size_t paramIndex = 0;
  std::vector<Dim> dims;
  PlanDType dtype = PlanDType::F32;

  int64_t numElements() const { return rt::numElements(dims); }
};

/// One argument of the entry function (`tokens`, `labels`).
struct InputInfo {
  std::string name;
  PlanDType dtype = PlanDType::I32;
  std::vector<Dim> dims;
};

/// The cost model's figures.
struct Predictions {
  int64_t parameters = 0;
  int64_t forwardFlopsPerToken = 0;
  int64_t backwardFlopsPerToken = 0;
  struct MemoryBytes {
    int64_t parameters = 0;
    int64_t gradients = 0;
    int64_t optimizerState = 0;
    int64_t savedActivations = 0;
    int64_t total = 0;
    /// The compiled kernels' peak temporaries, and the peak bytes per rank (the runtime's
    /// buffers plus that workspace): present when the plan has kernels.
    std::optional<int64_t> workspace;
    std::optional<int64_t> peak;
  } memoryBytes;
  /// What one rank sends in the compiled step's own collectives, per call of each function
  /// (present with kernels; 0 without a mesh).
  struct CommunicationBytes {
    int64_t forwardBackward = 0; // per micro-batch
    int64_t optimizerStep = 0;
    /// With pipeline parallelism: per call of each chunk and stage function, by name
    /// (`chunk0.forward`, ..., `stage1.optimizer_step`).
    std::map<std::string, int64_t, std::less<>> pipelineFunctions;
    /// At most what the step sends (`upper_bound`: it moves only the filled slots of
    /// dropless expert routing, which depend on the data).
    bool upperBound = false;
  };
  std::optional<CommunicationBytes> communicationBytes;
};

/// What a buffer of a compiled step function holds (docs/plan-format.md, "Kernels"). The
/// pipeline's functions add `activation` (a chunk's input or output), `activation_grad` (its
/// gradient), `residual` (what a chunk's forward keeps for its backward), `stash` (what
/// backward_input keeps for backward_weight) and `grad_squares` (a stage's part of the squared
/// gradient norm). forward_backward may also return `expert_load`: the tokens each MoE
/// layer routed to each expert (i64 [layers, experts], the sum over the ranks of its routing
/// group). The generation function `logits` returns `logits`: the scores of every class at
/// every position (f32 [tokens' dims..., vocabulary]). Cached generation (`prefill`,
/// `decode_step`) also passes `keys` and `values`: every layer's cache of what attention
/// took as keys and values (f32 [layers, ...]).
enum class BufferKind {
  Input,
  Param,
  State,
  Grad,
  Loss,
  Step,
  GradScale,
  GradNorm,
  Lr,
  Activation,
  ActivationGrad,
  Residual,
  Stash,
  GradSquares,
  ExpertLoad,
  Logits,
  Keys,
  Values
};

/// "input", "param", ...
std::string_view bufferKindName(BufferKind kind);
std::optional<BufferKind> parseBufferKind(std::string_view name);

/// One argument of a compiled step function: a row-major buffer of `dims`.
struct KernelBuffer {
  BufferKind kind = BufferKind::Input;
  std::string name; // the parameter, state or input name; the kind for scalars
  PlanDType dtype = PlanDType::F32;
  std::vector<Dim> dims;
  /// `index` of a residual or stash buffer: which one of the producing function's outputs of
  /// that kind it is (-1 for the other kinds).
  int64_t index = -1;

  int64_t numElements() const { return rt::numElements(dims); }
};

/// A compiled step function: `symbol(void **descriptors)`, inputs then outputs.
/// The alignment of every arena offset (and of the arena itself).
inline constexpr int64_t kKernelArenaAlignment = 64;

/// One temporary of a kernel call in its arena: the bytes the kernel asks for and where
/// they are (kKernelArenaAlignment-aligned).
struct ArenaAllocation {
  int64_t size = 0;
  int64_t offset = 0;
};

/// Where a function's temporaries live (`arena`, docs/plan-format.md): one call makes
/// `allocations` in this order; those live at once do not overlap.
struct KernelArenaPlan {
  int64_t bytes = 0;
  int64_t peakBytes = 0;
  std::vector<ArenaAllocation> allocations;
};

struct KernelFunction {
  std::string symbol;
  std::vector<KernelBuffer> inputs;
  std::vector<KernelBuffer> outputs;
  std::optional<KernelArenaPlan> arena;
};

/// A pipeline model chunk's functions (`chunk<c>.forward`, ...; docs/plan-format.md
/// "Kernels"): its layers of the stack are [firstLayer, firstLayer + numLayers).
struct ChunkKernels {
  int64_t firstLayer = 0, numLayers = 0;
  std::optional<KernelFunction> forward, backward, backwardInput, backwardWeight;
};

/// A pipeline stage's optimizer functions (`stage<s>.grad_squares`, `stage<s>.optimizer_step`).
struct StageKernels {
  std::optional<KernelFunction> gradSquares, optimizerStep;
};

/// The plan's compiled step for one target (`kernels.x86_64`).
struct KernelsInfo {
  std::string file; // relative to the plan directory, listed in MANIFEST
  std::optional<KernelFunction> forward;
  std::optional<KernelFunction> forwardBackward;
  std::optional<KernelFunction> optimizerStep;
  /// The generation function (absent where the model has no logits to return).
  std::optional<KernelFunction> logits;
  /// Cached generation (both or neither; single-rank plans only): `prefill` scores a window
  /// and returns the cache, `decode_step` scores one position with it (docs/plan-format.md).
  std::optional<KernelFunction> prefill, decodeStep;
  /// With pipeline parallelism: per model chunk and per stage (empty otherwise).
  std::vector<ChunkKernels> chunks;
  std::vector<StageKernels> stages;
};

/// What a CUDA kernel launch passes for one parameter
/// (`kernels.cuda.functions.<f>.launches[i].args`): a buffer or a scalar.
struct CudaLaunchArgument {
  enum class Kind { Argument, Temporary, View, Scalar };
  Kind kind = Kind::View;
  /// The function argument's position (Kind::Argument), else -1.
  int64_t index = -1;
  int64_t bytes = 0;
  /// A scalar's MLIR type ("index", "i64", ...).
  std::string scalarType;
};

/// One kernel launch of a step function, in the order the function runs them.
struct CudaLaunch {
  std::string kernel;
  std::array<int64_t, 3> grid{}, block{};
  std::vector<CudaLaunchArgument> args;
};

/// A step function's CUDA side: its launches, and the functions it calls (GEMMs,
/// collectives, layers), which stay on the host.
struct CudaFunction {
  std::string name;
  std::vector<std::string> calls;
  std::vector<CudaLaunch> launches;
};

/// The kernels of one chip: PTX, and the cubin ptxas assembled when the plan was compiled
/// (absent when it was not found).
struct CudaBinary {
  std::string chip;
  std::string ptxFile;
  std::optional<std::string> cubinFile;
};

/// The plan's CUDA kernels (`kernels.cuda`, `mtc compile --target=cuda`) and the host code
/// that launches them (`host`: `kernels/cuda_host.so`, an x86 object with the x86 kernels'
/// entry points and calling convention, KernelLibrary.h; absent in plans compiled before
/// it existed). Nothing in the runtime executes them on a GPU yet.
struct CudaKernelsInfo {
  int64_t blockSize = 0;
  std::vector<CudaBinary> binaries;
  std::vector<CudaFunction> functions;
  std::optional<KernelsInfo> host;
  /// The device workspace the host code's temporaries are placed in (`host.workspace_bytes`).
  int64_t hostWorkspaceBytes = 0;

  size_t numLaunches() const;
};

/// One MANIFEST line.
struct ManifestEntry {
  std::string name;   // relative to the plan directory
  uint64_t size = 0;  // bytes
  std::string sha256; // 64 lowercase hex digits
};

/// A verified plan.
struct Plan {
  std::filesystem::path dir;
  int version = kPlanFormatVersion;
  /// MANIFEST's lines in order (each file verified).
  std::vector<ManifestEntry> files;
  /// The SHA-256 of plan.json (verified against MANIFEST).
  std::string planSha256;

  std::string model;
  std::string compiler;
  std::string sourcePath;
  std::string sourceSha256;
  uint64_t seed = 0;
  /// Every dimension of the model in plan.json order (`batch` is the micro-batch).
  std::vector<Dim> dims;
  /// The dimension of `dims` that token ids index (`vocabulary`: what the loss classifies
  /// over and the embedding table is indexed by); empty for a model without one.
  std::string vocabulary;
  /// `vocabulary_size`: the number of token ids, the vocabulary's real size. Below its size
  /// in `dims` when the compiler padded it to a multiple of tp (mt-pad-vocabulary): the
  /// padded classes are masked out of the loss, the padded elements of parameters and
  /// states are zero, and checkpoints and exports hold the real rows only
  /// (runtime/plan/VocabularyPadding.h). 0 without a vocabulary.
  int64_t vocabularyRealSize = 0;
  /// `mesh.axes` in order (the axis index is the position here); empty without tensor
  /// parallelism.
  std::vector<MeshAxis> mesh;
  /// `mesh.data_parallel_axis` (the distributed optimizer): the index into `mesh` of the axis
  /// that *is* data parallelism, always the first. Then the job's world size must equal
  /// meshSize(), the data-parallel degree is that axis' size and a rank's data-parallel index
  /// its coordinate on it. Absent: data parallelism is outside the mesh (world / meshSize()).
  std::optional<size_t> dataParallelAxis;
  /// `mesh.zero_stage` (with a data-parallel axis): 1, the default, shards the optimizer state
  /// (ZeRO-1); 2 also keeps the accumulated gradients only as shards (ZeRO-2: each
  /// micro-batch's gradient is reduce-scattered at once); 3 also the parameters (ZeRO-3: the
  /// parameters' layouts split over the axis, and the kernels gather them where they are
  /// used, take the data-parallel group's micro-batch, each rank its part, and return the
  /// gradients reduce-scattered: the runtime reduces nothing over the axis but the loss).
  /// 0 without a data-parallel axis.
  int64_t zeroStage = 0;
  /// ZeRO-3: the kernels take parameter shards and the data-parallel group's micro-batch
  /// (this rank's part), and reduce the gradients (and count an MoE model's tokens per
  /// expert) over the group themselves.
  bool shardsParameters() const { return zeroStage == 3; }
  /// The `train {}` and `parallel {}` settings as written (objects).
  JsonValue train;
  /// `train.dropout` (absent: true): false (`train { dropout off }`) trains with every
  /// dropout site inactive (each element kept unscaled), as evaluation runs.
  bool dropout = true;
  /// `train.eod_mask_loss` (absent: false): Megatron's --eod-mask-loss. The step takes a
  /// third input after the tokens and labels, `loss_mask` (f32, the labels' dims): 0 where the
  /// token is the end of document, 1 elsewhere (runtime/data/LossMask.h); the loss is the
  /// mean weighted by it.
  bool eodMaskLoss = false;
  /// `train.reset_position_ids` (absent: false): Megatron's --reset-position-ids. The step
  /// takes the position ids as its last data input, `position_ids` (i32, the tokens' dims):
  /// each token's position within its document (runtime/data/Documents.h).
  bool resetPositionIds = false;
  /// `train.reset_attention_mask` (absent: false): Megatron's --reset-attention-mask.
  /// Attention stays within each document, which the step reads from the position ids: it
  /// takes them (`position_ids`, as with reset_position_ids) whichever of the two is set.
  bool resetAttentionMask = false;
  /// Whether the step takes the position ids (reset_position_ids or reset_attention_mask).
  bool takesPositionIds() const { return resetPositionIds || resetAttentionMask; }
  /// `train.precision` is "fp16" (absent: fp32): the step's backward starts from the
  /// runtime's loss scale (`mt.loss_scale`), which the trainer chooses (LossScaler.h).
  bool lossScaling = false;
  /// `train.steps`, verified to be a step count from 0 to kMaxTrainSteps (0 when absent):
  /// the steps a run takes unless told otherwise.
  int64_t steps = 0;
  JsonValue parallel;
  std::vector<InputInfo> inputs;
  std::vector<ParamInfo> params;
  std::vector<StateInfo> states;
  /// Names of the functions of program.mlir.
  std::vector<std::string> functions;
  Predictions predictions;
  /// The compiled step for x86-64 CPUs (`mtc compile --kernels=x86`), if the plan has one.
  std::optional<KernelsInfo> x86Kernels;
  /// The step's CUDA kernels (`mtc compile --target=cuda`), if the plan has them.
  std::optional<CudaKernelsInfo> cudaKernels;
  /// `pipeline` (PipelineSchedule.h): the stages and each stage's task list per micro-batch
  /// count. Absent: one stage, the step of the kernels above.
  std::optional<PipelinePlan> pipeline;

  const ParamInfo *findParam(std::string_view name) const;
  const ManifestEntry *findFile(std::string_view name) const;
  /// The size of a model dimension, if the plan has it.
  std::optional<int64_t> dimSize(std::string_view name) const;
  /// The number of token ids (the real size of `vocabulary`), if the model has a vocabulary.
  std::optional<int64_t> vocabularySize() const;
  /// Whether the vocabulary is padded (`dims` holds more than vocabularySize()).
  bool vocabularyPadded() const;
  /// Elements of all parameters together.
  int64_t numParameterElements() const;
  /// The product of the mesh axes' sizes (1 without a mesh): the ranks one copy of the model
  /// is partitioned over.
  int64_t meshSize() const;
  /// `dims` on one rank under `layout`: every split dim divided by the product of its axes'
  /// sizes.
  std::vector<Dim> localDims(const std::vector<Dim> &dims, const ParamLayout &layout) const;
  /// A parameter's dims on one rank (its `layout`). Equal to `param.dims` when replicated.
  std::vector<Dim> localDims(const ParamInfo &param) const;
  /// The dims on one rank of the parameter's optimizer states and of its gradient as
  /// `optimizer_step` takes it (its stateLayout()).
  std::vector<Dim> optimizerLocalDims(const ParamInfo &param) const;
  /// The layout of an optimizer state: its parameter's stateLayout().
  const ParamLayout &stateLayout(const StateInfo &state) const;
  /// The dimension the parameter's optimizer layout splits over the data-parallel axis (the
  /// distributed optimizer shards its gradient and states along it); none when the plan has
  /// no data-parallel axis or the parameter's state is whole over it.
  std::optional<size_t> dataParallelShardDim(const ParamInfo &param) const;
  /// "heads over tp, ffn over tp x cp"; "replicated" when not split.
  std::string describeLayout(const std::vector<Dim> &dims, const ParamLayout &layout) const;
  std::string describeLayout(const ParamInfo &param) const;
};

/// Loads and verifies the plan directory `dir` (see the file comment).
Expected<Plan> loadPlan(const std::filesystem::path &dir);

/// Parses MANIFEST text: the format line and the file lines (names checked, duplicates
/// rejected), without looking at the files. `where` (the plan directory as shown to users)
/// prefixes every error. Returns the format version and the entries.
Expected<std::pair<int, std::vector<ManifestEntry>>> parseManifest(std::string_view text,
                                                                   std::string_view where);

/// Parses and checks plan.json text into a Plan (without `dir`, `files` and `planSha256`).
/// `where` (e.g. "model.plan/plan.json") prefixes every error.
Expected<Plan> parsePlanJson(std::string_view text, std::string_view where);

/// Whether `name` may appear in a MANIFEST: a plain file name (letters, digits, '.', '_',
/// '-', '+'; not starting with '.'), optionally after the `kernels/` prefix.
bool isSafePlanFileName(std::string_view name);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_PLAN_H

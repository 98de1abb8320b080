//===- Layout.h - the parallel layout a module asks for ---------*- C++ -*-===//
//
// What `parallel {}` (or mtc's --tp/--sp/--layout flags) means for sharding: the mesh the
// step is partitioned over and which dimensions each axis splits. Shared by the partition
// pass and the plan writer, so the plan's parameter layouts are the ones the kernels use.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_SHARDING_LAYOUT_H
#define MTC_COMPILER_SHARDING_LAYOUT_H

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mtc::sharding {

/// Module attribute of a model whose vocabulary mt-pad-vocabulary padded to a multiple of
/// tp: `{dim = "vocab", size = V}`, the dimension and its real size (the types and
/// `mt.dims` hold the padded one).
inline constexpr llvm::StringLiteral kVocabularyAttrName = "mt.vocabulary";

/// Megatron's tensor-parallel layout: the dimensions `tp` splits unless a layout says
/// otherwise (the frontend checks the same list against `parallel { tp N }`).
inline constexpr llvm::StringLiteral kMegatronTensorParallelDims[] = {"heads", "kv_heads", "ffn",
                                                                      "vocab"};

/// The module attribute (an i64) `mtc compile --zero-stage 2|3` sets over the distributed
/// optimizer (stage 1). Stage 2: the runtime also keeps the gradients only as shards (the
/// kernels are those of stage 1, the plan records `mesh.zero_stage`). Stage 3: the
/// parameters too are sharded over `dp` (ShardingSpec::shardParameters), which changes the
/// kernels.
inline constexpr llvm::StringLiteral kZeroStageAttrName = "mtc.zero_stage";

/// The ZeRO stage `module` is compiled for: kZeroStageAttrName, else 1 with the
/// distributed optimizer, else 0.
int64_t zeroStage(mlir::ModuleOp module);

struct ShardingSpec {
  /// The axes the compiled step is partitioned over (`dp` with the distributed optimizer,
  /// then `tp`); null when the module asks for neither.
  mtp::MeshAttr mesh;
  /// Dimension -> the axis splitting it in parameters and wherever else nothing needs
  /// it whole (Megatron: heads, kv_heads, ffn, vocab -> tp).
  llvm::StringMap<std::string> dimAxis;
  /// Sequence parallelism: `seq` split over `tp` in the norm and dropout regions, inside
  /// its split over `cp` under context parallelism (`seq = [cp, tp]`) (empty when off).
  std::string sequenceDim;
  /// The distributed optimizer: the mesh's data-parallel axis ("dp"), over which the
  /// optimizer step shards the optimizer state (empty when off).
  std::string dataParallelAxis;
  /// ZeRO-3 (FSDP): the parameters are sharded over the data-parallel axis like their
  /// optimizer states (parameterLayout = optimizerLayout). The step then takes each rank's
  /// shard and gathers a parameter where it is used (inside the layer function for a
  /// layer's), its micro-batch is the data-parallel group's (`batch` over `dp`, each rank's
  /// part arriving as its own; over `[dp, ep]` with expert parallelism, the ep ranks of a
  /// data-parallel rank slicing its part), and the gradients leave it reduce-scattered into
  /// shards. An expert weight is split over ep besides; a dense one is replicated over ep.
  bool shardParameters = false;
  /// The optimizer layout never splits `layers` over dp: under ZeRO-3 (a layer's parameters
  /// are gathered inside the layer) and under ZeRO-2 with pipeline parallelism (a pipeline
  /// chunk's gradient, the rows of its layers in a stage's tensor, is reduce-scattered as
  /// the chunk returns it).
  bool keepLayersWhole = false;
  /// Expert parallelism: the axis ("ep") splitting `experts` in expert weights (parameters
  /// whose first dimension after `layers` is `experts`; a router [hidden, experts] stays
  /// whole) (empty when off).
  std::string expertAxis;
  /// The dimension of the experts (`experts`, or the one a layout maps to ep): expert
  /// weights are the parameters leading with it (after `layers`).
  std::string expertDim;
  /// Expert tensor parallelism (etp = tp, Megatron's default): the expert weights are split
  /// over tp like the dense ones. Off (etp = 1): they are whole (see foldedAxis).
  bool splitExpertWeights = true;
  /// Megatron's parallel folding (etp = 1 under tp > 1): the tensor-parallel axis ("tp")
  /// folded into expert parallelism, splitting the experts inside their split over ep
  /// (`experts = [ep, tp]`): each rank holds experts / (ep * tp) whole experts and computes
  /// only theirs (empty when off).
  std::string foldedAxis;
  /// Dimension -> the axes splitting it in the step's data from the entry on, outermost
  /// first: `batch -> [ep]` (each expert-parallel rank routes its own part of the
  /// micro-batch, as Megatron's expert-parallel ranks are data-parallel ranks), `batch ->
  /// [dp]` under ZeRO-3 (each data-parallel rank computes its part of the group's
  /// micro-batch), `batch -> [dp, ep]` under both (each rank computes and routes its own
  /// part: dp x ep are the dense layers' data-parallel ranks), and `seq -> [cp]` (context
  /// parallelism). The entry functions' data arguments arrive whole (under ZeRO-3 as the
  /// data-parallel rank's part) and are sliced at the entry (no communication).
  llvm::StringMap<llvm::SmallVector<std::string, 1>> activationAxes;
};

/// The spec `module`'s `mt.parallel` attribute gives. Fails, with a diagnostic on the
/// module, on what the partitioner does not support (a layout entry on another axis than
/// tp, ep (the experts' dimension) or cp (the sequence's), other than `batch: dp`; an ep or
/// cp entry whose degree is 1; an ep without expert weights or with the experts mapped to
/// another axis too; an expert tensor-parallel degree other than tp and 1, or 1 under tp > 1
/// where ep x tp does not divide the experts).
mlir::FailureOr<ShardingSpec> getShardingSpec(mlir::ModuleOp module);

/// The layout of a parameter of global type `type` (also of its gradient): every dimension
/// the spec maps is split over its axis; `layers` never is, `experts` only where it leads
/// (expert weights, not the router), and an expert weight's dimensions not over tp under
/// etp 1 (its experts over [ep, tp] instead: the spec's foldedAxis). Under ZeRO-3 it is the
/// optimizer layout. Fails, through `emitError`, when an axis does not divide its dimension.
mlir::FailureOr<mtp::ShardedTensorType>
parameterLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The layout of a parameter's optimizer states and of its gradient as the optimizer step
/// takes it: the parameter's layout, with the distributed optimizer also the first
/// dimension it does not split and that the data-parallel degree divides split over `dp`
/// (none: the state stays whole). Under ZeRO-3 that dimension is not `layers`: a layer's
/// parameters are gathered one layer at a time, so each rank holds a part of every layer.
mlir::FailureOr<mtp::ShardedTensorType>
optimizerLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace mtc::sharding

#endif // MTC_COMPILER_SHARDING_LAYOUT_H

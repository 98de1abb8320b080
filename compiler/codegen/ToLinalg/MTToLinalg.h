//===- MTToLinalg.h - pieces shared by the mt-to-linalg patterns -*- C++ -*-===//
//
// Internal to compiler/codegen/ToLinalg (the CPU backend reads only the names of the external
// functions the kernels call): the type and indexing-map helpers every `mt` -> linalg
// pattern uses, and one `populate...` function per source file of patterns. The pass itself
// (MTToLinalg.cpp) collects them. All patterns work on builtin tensors: an `!mt.tensor` is
// the `tensor<...>` of its sizes in its physical order (builtinType).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_TOLINALG_MTTOLINALG_H
#define MTC_COMPILER_CODEGEN_TOLINALG_MTTOLINALG_H

#include "runtime/exec/KernelABI.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mtc::codegen::lowering {

/// Dropout is decided inside the kernel, one Philox evaluation per element, with the key of
/// the call in progress read from the runtime once per dropout op:
///
///     int64_t mtc_dropout_key(int64_t stream, int64_t word);
///     int32_t mtc_dropout_keep_element(uint64_t seed, uint32_t tensor_id, uint64_t index,
///                                      uint32_t step, float keep_prob);
///
/// `mtc_dropout_key` (external, defined by the runtime: runtime/exec/DropoutKey.h)
/// returns word `word` (`mtc_dropout_key_word` of runtime/support/Philox.h: seed, tensor id
/// of the site in the current layer instance, counter step, index base, active) of the key
/// of dropout site `stream`. `mtc_dropout_keep_element` is Philox.h's `mtc_dropout_keep`,
/// the one implementation shared by the runtime, generated code, the interpreter and the
/// tests: the CPU backend links it into the object from LLVM bitcode compiled from
/// compiler/codegen/CPU/DropoutKeep.c, where LLVM inlines and vectorises it. An element at
/// `batch` coordinate `b` and row-major offset `e` over the other dimensions of the op's
/// (global) type has the counter `c = b * MTC_DROPOUT_SAMPLE_STRIDE + e` (its sample in the
/// high bits) and is kept iff `mtc_dropout_keep_element(seed, tensor_id, index_base + c,
/// step, 1 - rate)` and then scaled by 1 / (1 - rate), else zeroed; with `active` 0 every
/// element is kept unscaled.
///
/// Functions called inside a kernel body (only kDropoutKeepFunction) are pure: fusion may
/// duplicate or drop such calls (compiler/fusion/FuseElementwise.cpp).
inline constexpr llvm::StringLiteral kDropoutKeyFunction = MTC_ABI_DROPOUT_KEY;
inline constexpr llvm::StringLiteral kDropoutKeepFunction = MTC_ABI_DROPOUT_KEEP_ELEMENT;

/// The external C function `mt.loss_scale` reads the runtime's loss scale of the call in
/// progress with (the kernel ABI's, runtime/exec/KernelABI.h):
///
///     float mtc_loss_scale(void);   // 1 where the runtime gives none
inline constexpr llvm::StringLiteral kLossScaleFunction = MTC_ABI_LOSS_SCALE;

/// The external C function a scan calls around the calls of its layer when the module has
/// dropout, so that every repeat of a layer draws its own masks:
///
///     void mtc_dropout_layer(int64_t instance);
///
/// `instance` is the repeat about to run; -1 after the scan (outside any layer).
inline constexpr llvm::StringLiteral kDropoutLayerFunction = MTC_ABI_DROPOUT_LAYER;

/// The external C functions a partitioned step calls for its collectives (the kernel ABI's,
/// runtime/exec/KernelABI.h; defined by the runtime, runtime/exec/MeshCollectives.h), on
/// contiguous row-major buffers passed as addresses, `axis` being the position of the mesh
/// axis in the module's `mtp.mesh` and `dtype` the ABI's MtcElementType (MTC_F32, MTC_F64):
///
///     void mtc_all_reduce(int64_t axis, int64_t dtype, int64_t op, const void *in,
///                         void *out, int64_t count);   // op: MTC_SUM, MTC_MAX
///     void mtc_all_gather(int64_t axis, int64_t dtype, const void *in, void *out,
///                         int64_t count);   // count of `in`; block c from coordinate c
///     void mtc_reduce_scatter(int64_t axis, int64_t dtype, const void *in, void *out,
///                             int64_t count); // count of `out`; my block of the sum
///     void mtc_all_to_all(int64_t axis, int64_t dtype, const void *in, void *out,
///                         int64_t count); // per block: block c of `in` to coordinate c,
///                                         // block c of `out` from coordinate c
///     void mtc_shift(int64_t axis, int64_t dtype, int64_t offset, int64_t rotate,
///                    const void *in, void *out, int64_t count); // `in` to coordinate
///                                         // c + offset, `out` from c - offset
///     int64_t mtc_mesh_coordinate(int64_t axis);
inline constexpr llvm::StringLiteral kAllReduceFunction = MTC_ABI_ALL_REDUCE;
inline constexpr llvm::StringLiteral kAllGatherFunction = MTC_ABI_ALL_GATHER;
inline constexpr llvm::StringLiteral kReduceScatterFunction = MTC_ABI_REDUCE_SCATTER;
inline constexpr llvm::StringLiteral kAllToAllFunction = MTC_ABI_ALL_TO_ALL;
inline constexpr llvm::StringLiteral kShiftFunction = MTC_ABI_SHIFT;
/// void mtc_all_to_all_filled(int64_t axis, int64_t dtype, const void *in, void *out,
///                            void *scratch, const int64_t *counts, int64_t slots_first,
///                            int64_t a, int64_t b, int64_t row);
/// mtp.all_to_all with filled counts: blocks [parts][a][b][row] (MeshCollectives.h).
inline constexpr llvm::StringLiteral kAllToAllFilledFunction = MTC_ABI_ALL_TO_ALL_FILLED;
inline constexpr llvm::StringLiteral kMeshCoordinateFunction = MTC_ABI_MESH_COORDINATE;

inline mt::NamedTensorType namedType(mlir::Value value) {
  return llvm::cast<mt::NamedTensorType>(value.getType());
}

/// The builtin tensor holding a named tensor: its sizes in physical order.
mlir::RankedTensorType builtinType(mt::NamedTensorType type);

/// The map from the iteration space `space` (dimension names) to the dimensions of a
/// tensor of type `type`, each of which `space` names.
mlir::AffineMap mapInto(llvm::ArrayRef<mlir::StringAttr> space, mt::NamedTensorType type);

/// A fresh tensor of `type`'s shape, the destination of a linalg op.
mlir::Value emptyTensor(mlir::OpBuilder &builder, mlir::Location loc, mt::NamedTensorType type);

/// `value` as a constant of the scalar `type` (float or integer).
mlir::Value scalarConstant(mlir::OpBuilder &builder, mlir::Location loc, mlir::Type type,
                           double value);

mlir::Value indexConstant(mlir::OpBuilder &builder, mlir::Location loc, int64_t value);

/// A tensor of `type` filled with `value`.
mlir::Value fill(mlir::OpBuilder &builder, mlir::Location loc, mt::NamedTensorType type,
                 mlir::TypedAttr value);

/// `value` (a ranked tensor) with its dimensions permuted: position i of the result is
/// position `permutation[i]` of `value`. A `linalg.transpose`, or `value` itself for the
/// identity.
mlir::Value transposed(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value value,
                       llvm::ArrayRef<int64_t> permutation);

/// A `linalg.generic` over the dimensions of `type` (identity maps) with `input` as its
/// one operand; `body(builder, loc, element)` computes the result element.
mlir::Value buildPointwise(mlir::OpBuilder &builder, mlir::Location loc, mt::NamedTensorType type,
                           mlir::Value input,
                           llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                                          mlir::Value)>
                               body);

/// Element type conversion as the interpreter's `mt.cast`: floats extend or truncate;
/// float -> integer truncates toward zero (i1 as unsigned); integers are sign-extended (i1
/// zero-extended).
mlir::Value convertScalar(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value x,
                          mlir::Type to);

/// The integer `index` (of any integer type) as an `index` clamped into [0, size).
mlir::Value clampedIndex(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value index,
                         int64_t size);

/// Patterns of ShapeOpsToLinalg.cpp: rename, split, merge, iota.
void populateShapeOpPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns);
/// Patterns of GatherScatterToLinalg.cpp: gather, embedding_grad.
void populateGatherScatterPatterns(const mlir::TypeConverter &types,
                                   mlir::RewritePatternSet &patterns);
/// Patterns of RopeDropoutToLinalg.cpp: rope, dropout.
void populateRopeDropoutPatterns(const mlir::TypeConverter &types,
                                 mlir::RewritePatternSet &patterns);
/// Patterns of TopKToLinalg.cpp: topk, topk_grad.
void populateTopKPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns);
/// Patterns of MoEToLinalg.cpp: dispatch, combine, combine_grad, load_balancing_loss(_grad).
void populateMoEPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns);
/// Patterns of AttentionToLinalg.cpp: attention and attention_grad, fused (FlashAttention-2's
/// block loops; they reach mt-to-linalg whole only under `mt.fused_attention`).
void populateAttentionPatterns(const mlir::TypeConverter &types,
                               mlir::RewritePatternSet &patterns);
/// Patterns of ScanToSCF.cpp: repeat.
void populateScanPatterns(const mlir::TypeConverter &types, mlir::RewritePatternSet &patterns);
/// Patterns of CollectivesToCalls.cpp: the mtp collectives and local views.
void populateCollectivePatterns(const mlir::TypeConverter &types,
                                mlir::RewritePatternSet &patterns);
/// Declares the external collective functions in `module` when it is partitioned; fails
/// if a name is taken by anything else.
mlir::LogicalResult declareMeshFunctions(mlir::ModuleOp module);
/// This rank's coordinate along mesh axis `axis` (a call of kMeshCoordinateFunction), as
/// an index.
mlir::Value meshCoordinate(mlir::OpBuilder &builder, mlir::Location loc, int64_t axis);
/// Where this rank's part of dimension `dim` of a tensor laid out as `layout` starts in the
/// whole dimension (0 when `dim` is not split), as an index. Only for a contiguous part: no
/// axis splitting `dim` is `two_chunk` (see PartPositions).
mlir::Value partStart(mlir::OpBuilder &builder, mlir::Location loc,
                      mtp::ShardedTensorType layout, llvm::StringRef dim);
/// Whether an axis splitting dimension `dim` of `layout` is `two_chunk`, so this rank's part
/// is not one contiguous range of the whole dimension.
bool isTwoChunkSplit(mtp::ShardedTensorType layout, llvm::StringRef dim);

/// The global positions of the elements of this rank's part of dimension `dim` of a tensor
/// laid out as `layout`: the part's start plus the local index for a contiguous split.
/// Under a `two_chunk` axis of size n (Megatron's causal load balancing) the part being
/// split is cut in 2n chunks of h positions and coordinate c holds chunks c and 2n - 1 - c:
/// local index i < h lies at c h + i of that part, the others at (2n - 1 - c) h + i - h.
/// Axes nest (outermost first), so the position is built from the innermost axis outwards.
/// The coordinates are read where the object is built (outside loop bodies); `at` emits
/// only index arithmetic.
class PartPositions {
public:
  PartPositions(mlir::OpBuilder &builder, mlir::Location loc, mtp::ShardedTensorType layout,
                llvm::StringRef dim);
  /// The global position of local index `local` (an index).
  mlir::Value at(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value local) const;

private:
  /// One axis splitting the dimension, innermost first: the part it splits is cut into
  /// pieces of `pieceSize` positions; this rank's first piece starts at `lowStart`, and
  /// under `two_chunk` local positions from `pieceSize` on are offset by `highStart`.
  struct Level {
    int64_t pieceSize;
    mlir::Value lowStart, highStart;
  };
  llvm::SmallVector<Level> levels;
  /// Without `two_chunk`: where the part starts (the one offset of every position).
  mlir::Value start;
};

/// Declares each (name, type) of `declarations` as an external function of `module` (the
/// runtime defines them), once; fails if a name is taken by anything else, saying it is
/// reserved for `purpose`.
mlir::LogicalResult
declareRuntimeFunctions(mlir::ModuleOp module,
                        llvm::ArrayRef<std::pair<llvm::StringRef, mlir::FunctionType>> declarations,
                        llvm::StringRef purpose);

/// Declares kDropoutKeyFunction, kDropoutKeepFunction and kDropoutLayerFunction in `module`
/// when a function of it has a dropout to lower; fails if a name is taken by anything else.
mlir::LogicalResult declareDropoutFunctions(mlir::ModuleOp module);

/// Declares kLossScaleFunction when `module` has an `mt.loss_scale`.
mlir::LogicalResult declareLossScaleFunction(mlir::ModuleOp module);

} // namespace mtc::codegen::lowering

#endif // MTC_COMPILER_CODEGEN_TOLINALG_MTTOLINALG_H

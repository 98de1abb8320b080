//===- OpEval.h - op evaluators of the mt interpreter (internal) -*- C++ -*-===//
//
// Shared by the interpreter's source files only. Each stateless `mt` op has one
// `evalOp(XOp, Operands)` overload computing its results in float64; the interpreter
// dispatches to them and handles the ops that need its state (param_ref, assign, dropout,
// repeat, func.call) itself.
//
// Every layout question is answered by one mechanism: an iteration space (named
// dimensions iterated row-major) and, per tensor, its stride along each dimension of the
// space (0 for a dimension the tensor lacks, which is named broadcasting).
// `forEachPoint` walks the space and hands the flat offsets into each tensor.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_INTERPRETER_OPEVAL_H
#define MTC_COMPILER_INTERPRETER_OPEVAL_H

#include "compiler/interpreter/Interpreter.h"

#include "dialects/mt/IR/MTOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <array>

namespace mtc::interp::eval {

using llvm::Expected;
using Operands = llvm::ArrayRef<const Tensor *>;
using Results = llvm::SmallVector<Tensor, 1>;
using Strides = llvm::SmallVector<int64_t, 6>;

/// An error "<location>: 'mt.x': <message>".
llvm::Error opError(mlir::Operation *op, const llvm::Twine &message);

/// `location` as `file:line:col` where it has one, else as MLIR prints it.
std::string formatLocation(mlir::Location location);

inline mt::NamedTensorType typeOf(mlir::Value value) {
  return llvm::cast<mt::NamedTensorType>(value.getType());
}

inline bool hasIntegerElements(mt::NamedTensorType type) {
  return llvm::isa<mlir::IntegerType>(type.getElementType());
}

/// Dimensions iterated row-major (the last varies fastest).
struct Space {
  llvm::SmallVector<llvm::StringRef, 6> names;
  llvm::SmallVector<int64_t, 6> sizes;

  /// The dimensions of `type` in its order, without those in `except`.
  static Space of(mt::NamedTensorType type, llvm::ArrayRef<llvm::StringRef> except = {});
  Space &append(llvm::StringRef name, int64_t size);
  Space &append(const Space &other);
  int64_t getNumElements() const;
};

/// The stride of `type` along each dimension of `space`, 0 where `type` lacks it.
Strides stridesAlong(mt::NamedTensorType type, const Space &space);
/// A counter along one dimension: stride 1 along `dim`, 0 elsewhere, so that the offset it
/// yields in forEachPoint is the current index along `dim`.
Strides counterAlong(llvm::StringRef dim, const Space &space);
/// The flat offsets, in `type`, of every point of `space` (row-major over the space).
llvm::SmallVector<int64_t> offsetsOf(mt::NamedTensorType type, const Space &space);

/// Calls `fn(offsets)` for every point of `space` in row-major order, where offsets[i] is
/// the sum over dimensions of index * strides[i].
template <size_t N, typename Fn>
void forEachPoint(const Space &space, const std::array<Strides, N> &strides, Fn &&fn) {
  size_t rank = space.sizes.size();
  int64_t total = space.getNumElements();
  llvm::SmallVector<int64_t, 6> index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t point = 0; point < total; ++point) {
    fn(static_cast<const std::array<int64_t, N> &>(offsets));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < space.sizes[d]) {
        for (size_t i = 0; i < N; ++i)
          offsets[i] += strides[i][d];
        break;
      }
      for (size_t i = 0; i < N; ++i)
        offsets[i] -= strides[i][d] * (space.sizes[d] - 1);
      index[d] = 0;
    }
  }
}

/// Reads an integer index (an exact integral double) and checks it lies in [0, size).
llvm::Expected<int64_t> readIndex(mlir::Operation *op, double value, int64_t size,
                                  llvm::StringRef what);

/// log(sum_c exp(data[base + c * stride])) over c < size, stable (the maximum subtracted
/// first). Cross-entropy and the router z-loss share it.
double logSumExp(const Tensor &tensor, int64_t base, int64_t stride, int64_t size);

/// The rows of a table along `dim`: `rowOffsets` are the offsets of the other dimensions
/// (in the table's order) of row 0 and row r starts at r * `rowStride`. Gather and its
/// adjoint embedding_grad share it.
struct TableRows {
  int64_t numRows;
  int64_t rowStride;
  llvm::SmallVector<int64_t> rowOffsets;
  static TableRows of(mt::NamedTensorType table, llvm::StringRef dim);
};

//===----------------------------------------------------------------------===//
// Evaluators of the stateless ops, grouped by file.
//===----------------------------------------------------------------------===//

// ElementwiseOps.cpp
llvm::Expected<Results> evalOp(mt::ConstantOp op, Operands in);
/// 1: the interpreter runs without loss scaling.
llvm::Expected<Results> evalOp(mt::LossScaleOp op, Operands in);
llvm::Expected<Results> evalOp(mt::AddOp op, Operands in);
llvm::Expected<Results> evalOp(mt::SubOp op, Operands in);
llvm::Expected<Results> evalOp(mt::MulOp op, Operands in);
llvm::Expected<Results> evalOp(mt::DivOp op, Operands in);
llvm::Expected<Results> evalOp(mt::MaxOp op, Operands in);
llvm::Expected<Results> evalOp(mt::PowOp op, Operands in);
llvm::Expected<Results> evalOp(mt::GreaterOp op, Operands in);
llvm::Expected<Results> evalOp(mt::NegOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ExpOp op, Operands in);
llvm::Expected<Results> evalOp(mt::LogOp op, Operands in);
llvm::Expected<Results> evalOp(mt::SqrtOp op, Operands in);
llvm::Expected<Results> evalOp(mt::RsqrtOp op, Operands in);
llvm::Expected<Results> evalOp(mt::TanhOp op, Operands in);
llvm::Expected<Results> evalOp(mt::SigmoidOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CosOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ReluOp op, Operands in);
llvm::Expected<Results> evalOp(mt::SiluOp op, Operands in);
llvm::Expected<Results> evalOp(mt::GeluOp op, Operands in);
llvm::Expected<Results> evalOp(mt::GeluGradOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CastOp op, Operands in);

// ShapeOps.cpp: positions, layouts, contractions and reductions.
llvm::Expected<Results> evalOp(mt::IotaOp op, Operands in);
llvm::Expected<Results> evalOp(mt::TransposeOp op, Operands in);
llvm::Expected<Results> evalOp(mt::BroadcastOp op, Operands in);
llvm::Expected<Results> evalOp(mt::SplitOp op, Operands in);
llvm::Expected<Results> evalOp(mt::MergeOp op, Operands in);
llvm::Expected<Results> evalOp(mt::RenameOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ContractOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ReduceSumOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ReduceMeanOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ReduceMaxOp op, Operands in);

// NormAttentionOps.cpp
llvm::Expected<Results> evalOp(mt::SoftmaxOp op, Operands in);
llvm::Expected<Results> evalOp(mt::LayerNormOp op, Operands in);
llvm::Expected<Results> evalOp(mt::RMSNormOp op, Operands in);
llvm::Expected<Results> evalOp(mt::RopeOp op, Operands in);
llvm::Expected<Results> evalOp(mt::AttentionOp op, Operands in);
llvm::Expected<Results> evalOp(mt::AttentionGradOp op, Operands in);

// EmbeddingLossOps.cpp
llvm::Expected<Results> evalOp(mt::GatherOp op, Operands in);
llvm::Expected<Results> evalOp(mt::EmbeddingGradOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CrossEntropyOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CrossEntropyGradOp op, Operands in);

// MoEOps.cpp
llvm::Expected<Results> evalOp(mt::TopKOp op, Operands in);
llvm::Expected<Results> evalOp(mt::TopKGradOp op, Operands in);
llvm::Expected<Results> evalOp(mt::DispatchOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ExpertLoadOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CombineOp op, Operands in);
llvm::Expected<Results> evalOp(mt::CombineGradOp op, Operands in);
llvm::Expected<Results> evalOp(mt::LoadBalancingLossOp op, Operands in);
llvm::Expected<Results> evalOp(mt::LoadBalancingLossGradOp op, Operands in);
llvm::Expected<Results> evalOp(mt::ZLossOp op, Operands in);

} // namespace mtc::interp::eval

#endif // MTC_COMPILER_INTERPRETER_OPEVAL_H

//===- MTToLinalg.cpp - the mt-to-linalg pass and its elementwise ops -----===//
//
// Every supported `mt` op becomes linalg (mostly one `linalg.generic`), tensor and scf ops on
// builtin tensors whose indexing maps are read off the dimension names (see Passes.td). The
// iteration space of an op is a list of dimension names; an operand's map sends the space to
// the operand's own dimensions, picked by name, so broadcasting, transposition and any
// dimension order are just maps.
//
// This file holds the shared helpers (MTToLinalg.h), the elementwise, reduction and
// contraction patterns, and the pass; the other ops are in ShapeOpsToLinalg.cpp (rename,
// split, merge, iota), GatherScatterToLinalg.cpp (gather, embedding_grad),
// RopeDropoutToLinalg.cpp (rope, dropout), TopKToLinalg.cpp (topk, topk_grad),
// MoEToLinalg.cpp (dispatch, combine and their backward, the load-balancing loss),
// AttentionToLinalg.cpp (fused attention and its backward) and ScanToSCF.cpp (repeat).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/Passes.h"
#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <array>
#include <numbers>
#include <variant>

namespace mtc::codegen {
#define GEN_PASS_DEF_MTTOLINALGPASS
#include "compiler/codegen/ToLinalg/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;
namespace lowering = mtc::codegen::lowering;

//===----------------------------------------------------------------------===//
// Shared helpers (MTToLinalg.h)
//===----------------------------------------------------------------------===//

RankedTensorType lowering::builtinType(NamedTensorType type) {
  return RankedTensorType::get(type.getDimSizes(), type.getElementType());
}

AffineMap lowering::mapInto(ArrayRef<StringAttr> space, NamedTensorType type) {
  MLIRContext *context = type.getContext();
  SmallVector<AffineExpr> results;
  for (StringAttr name : type.getDimNames()) {
    const auto *it = llvm::find(space, name);
    assert(it != space.end() && "operand dimension missing from the iteration space");
    results.push_back(getAffineDimExpr(it - space.begin(), context));
  }
  return AffineMap::get(space.size(), /*symbolCount=*/0, results, context);
}

Value lowering::emptyTensor(OpBuilder &builder, Location loc, NamedTensorType type) {
  return tensor::EmptyOp::create(builder, loc, type.getDimSizes(), type.getElementType());
}

Value lowering::scalarConstant(OpBuilder &builder, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(builder, loc, builder.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(builder, loc,
                                   builder.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value lowering::indexConstant(OpBuilder &builder, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(builder, loc, value);
}

Value lowering::fill(OpBuilder &builder, Location loc, NamedTensorType type, TypedAttr value) {
  Value scalar = arith::ConstantOp::create(builder, loc, value);
  return linalg::FillOp::create(builder, loc, scalar, emptyTensor(builder, loc, type))
      .getResult(0);
}

Value lowering::transposed(OpBuilder &builder, Location loc, Value value,
                          ArrayRef<int64_t> permutation) {
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> sizes =
      llvm::map_to_vector(permutation, [&](int64_t dim) { return type.getDimSize(dim); });
  Value init = tensor::EmptyOp::create(builder, loc, sizes, type.getElementType());
  return linalg::TransposeOp::create(builder, loc, value, init, permutation)->getResult(0);
}

Value lowering::clampedIndex(OpBuilder &builder, Location loc, Value index, int64_t size) {
  Value cast = arith::IndexCastOp::create(builder, loc, builder.getIndexType(), index);
  Value low = arith::MaxSIOp::create(builder, loc, cast, indexConstant(builder, loc, 0));
  return arith::MinSIOp::create(builder, loc, low, indexConstant(builder, loc, size - 1));
}

Value lowering::convertScalar(OpBuilder &b, Location loc, Value x, Type to) {
  Type from = x.getType();
  if (from == to)
    return x;
  auto fromFloat = dyn_cast<FloatType>(from), toFloat = dyn_cast<FloatType>(to);
  bool fromBool = from.isInteger(1), toBool = to.isInteger(1);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() < toFloat.getWidth())
      return arith::ExtFOp::create(b, loc, to, x);
    return arith::TruncFOp::create(b, loc, to, x);
  }
  if (fromFloat)
    return toBool ? Value(arith::FPToUIOp::create(b, loc, to, x))
                  : Value(arith::FPToSIOp::create(b, loc, to, x));
  if (toFloat)
    return fromBool ? Value(arith::UIToFPOp::create(b, loc, to, x))
                    : Value(arith::SIToFPOp::create(b, loc, to, x));
  if (from.getIntOrFloatBitWidth() > to.getIntOrFloatBitWidth())
    return arith::TruncIOp::create(b, loc, to, x);
  return fromBool ? Value(arith::ExtUIOp::create(b, loc, to, x))
                  : Value(arith::ExtSIOp::create(b, loc, to, x));
}

namespace {

//===----------------------------------------------------------------------===//
// Elementwise kernels
//===----------------------------------------------------------------------===//

/// An operand of an elementwise kernel: its original `mt` value and its converted tensor.
/// An operand produced by `mt.constant` is not read from memory but materialised in the
/// body as an `arith.constant`.
struct Operand {
  Value original;
  Value converted;
};

using ScalarFn = function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)>;

/// One `linalg.generic` over the dimensions of `resultType`, all parallel, computing
/// `compute(operand scalars)` at every element.
Value buildElementwise(OpBuilder &builder, Location loc, NamedTensorType resultType,
                       ArrayRef<Operand> operands, ScalarFn compute) {
  ArrayRef<StringAttr> space = resultType.getDimNames();
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  // For each operand, the position of its block argument, or its constant value.
  SmallVector<std::variant<unsigned, double>> sources;
  for (const Operand &operand : operands) {
    if (auto constant = operand.original.getDefiningOp<mt::ConstantOp>()) {
      sources.push_back(constant.getValue().convertToDouble());
      continue;
    }
    sources.push_back(static_cast<unsigned>(inputs.size()));
    inputs.push_back(operand.converted);
    maps.push_back(mapInto(space, namedType(operand.original)));
  }
  maps.push_back(mapInto(space, resultType));
  SmallVector<utils::IteratorType> iterators(space.size(), utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{builtinType(resultType)}, inputs,
      ValueRange{emptyTensor(builder, loc, resultType)}, maps, iterators,
      [&](OpBuilder &b, Location l, ValueRange args) {
        SmallVector<Value> scalars;
        for (auto [operand, source] : llvm::zip_equal(operands, sources)) {
          if (const double *value = std::get_if<double>(&source))
            scalars.push_back(
                scalarConstant(b, l, namedType(operand.original).getElementType(), *value));
          else
            scalars.push_back(args[std::get<unsigned>(source)]);
        }
        linalg::YieldOp::create(b, l, compute(b, l, scalars));
      });
  return generic.getResult(0);
}

//===----------------------------------------------------------------------===//
// Scalar bodies
//===----------------------------------------------------------------------===//

/// Builds scalar arithmetic of one element type with constants of that type.
struct Scalar {
  OpBuilder &b;
  Location loc;
  Type type;

  Value c(double value) { return scalarConstant(b, loc, type, value); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value tanh(Value x) { return math::TanhOp::create(b, loc, x); }
  Value erf(Value x) { return math::ErfOp::create(b, loc, x); }
  Value greater(Value x, Value y) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    return arith::SelectOp::create(b, loc, condition, x, y);
  }
  /// 1 / (1 + exp(-x)): exp overflows to +inf for very negative x and the quotient is 0.
  Value sigmoid(Value x) { return div(c(1), add(c(1), exp(neg(x)))); }
};

/// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation of gelu, as in the
/// reference interpreter.
constexpr double kGeluTanhScale = 0.7978845608028654;
constexpr double kGeluTanhCubic = 0.044715;

/// tanh(sqrt(2/pi) (x + 0.044715 x^3)).
Value geluTanh(Scalar &s, Value x) {
  Value cube = s.mul(x, s.mul(x, x));
  return s.tanh(s.mul(s.c(kGeluTanhScale), s.add(x, s.mul(s.c(kGeluTanhCubic), cube))));
}

/// Phi(x) = 0.5 (1 + erf(x / sqrt 2)).
Value normalCdf(Scalar &s, Value x) {
  return s.mul(s.c(0.5), s.add(s.c(1), s.erf(s.mul(x, s.c(1 / std::numbers::sqrt2)))));
}

Value gelu(Scalar &s, Value x, bool approximate) {
  if (approximate)
    return s.mul(s.mul(s.c(0.5), x), s.add(s.c(1), geluTanh(s, x)));
  return s.mul(x, normalCdf(s, x));
}

/// d gelu / dx. Exact: Phi(x) + x phi(x). Tanh form, with t = tanh(c (x + a x^3)):
/// 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2).
Value geluGrad(Scalar &s, Value x, bool approximate) {
  if (approximate) {
    Value t = geluTanh(s, x);
    Value inner = s.mul(s.c(kGeluTanhScale),
                        s.add(s.c(1), s.mul(s.c(3 * kGeluTanhCubic), s.mul(x, x))));
    Value slope = s.mul(s.mul(s.mul(s.c(0.5), x), s.sub(s.c(1), s.mul(t, t))), inner);
    return s.add(s.mul(s.c(0.5), s.add(s.c(1), t)), slope);
  }
  Value pdf = s.mul(s.c(1 / std::sqrt(2 * std::numbers::pi)),
                    s.exp(s.mul(s.c(-0.5), s.mul(x, x))));
  return s.add(normalCdf(s, x), s.mul(x, pdf));
}

Type elementType(Value scalar) { return scalar.getType(); }

// Binary ops: float or (add, sub, mul, div, max) integer elements.
template <typename FloatOp, typename IntOp>
Value floatOrInt(OpBuilder &b, Location loc, ArrayRef<Value> v) {
  if (isa<FloatType>(elementType(v[0])))
    return FloatOp::create(b, loc, v[0], v[1]);
  return IntOp::create(b, loc, v[0], v[1]);
}
Value computeScalar(mt::AddOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return floatOrInt<arith::AddFOp, arith::AddIOp>(b, loc, v);
}
Value computeScalar(mt::SubOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return floatOrInt<arith::SubFOp, arith::SubIOp>(b, loc, v);
}
Value computeScalar(mt::MulOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return floatOrInt<arith::MulFOp, arith::MulIOp>(b, loc, v);
}
/// Integer division truncates toward zero, as the interpreter does.
Value computeScalar(mt::DivOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return floatOrInt<arith::DivFOp, arith::DivSIOp>(b, loc, v);
}
/// NaN-propagating, as the interpreter's "NaN wins".
Value computeScalar(mt::MaxOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return floatOrInt<arith::MaximumFOp, arith::MaxSIOp>(b, loc, v);
}
Value computeScalar(mt::PowOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::PowFOp::create(b, loc, v[0], v[1]);
}
Value computeScalar(mt::GreaterOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return s.select(s.greater(v[0], v[1]), s.c(1), s.c(0));
}

// Unary ops (float elements).
Value computeScalar(mt::NegOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return arith::NegFOp::create(b, loc, v[0]);
}
Value computeScalar(mt::ExpOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::ExpOp::create(b, loc, v[0]);
}
Value computeScalar(mt::LogOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::LogOp::create(b, loc, v[0]);
}
Value computeScalar(mt::SqrtOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::SqrtOp::create(b, loc, v[0]);
}
Value computeScalar(mt::RsqrtOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::RsqrtOp::create(b, loc, v[0]);
}
Value computeScalar(mt::TanhOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::TanhOp::create(b, loc, v[0]);
}
Value computeScalar(mt::CosOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  return math::CosOp::create(b, loc, v[0]);
}
Value computeScalar(mt::SigmoidOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return s.sigmoid(v[0]);
}
/// x > 0 ? x : 0 (NaN gives 0, as in the interpreter).
Value computeScalar(mt::ReluOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return s.select(s.greater(v[0], s.c(0)), v[0], s.c(0));
}
Value computeScalar(mt::SiluOp, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return s.mul(v[0], s.sigmoid(v[0]));
}
Value computeScalar(mt::GeluOp op, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return gelu(s, v[0], op.getApproximate());
}
Value computeScalar(mt::GeluGradOp op, OpBuilder &b, Location loc, ArrayRef<Value> v) {
  Scalar s{b, loc, elementType(v[0])};
  return geluGrad(s, v[0], op.getApproximate());
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// Binary and unary ops: one elementwise kernel over the result's dimensions.
template <typename Op>
struct ElementwiseLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    SmallVector<Operand> operands;
    for (auto [original, converted] :
         llvm::zip_equal(op->getOperands(), adaptor.getOperands()))
      operands.push_back({original, converted});
    Value result = buildElementwise(
        rewriter, op.getLoc(), namedType(op.getResult()), operands,
        [&](OpBuilder &b, Location loc, ArrayRef<Value> v) {
          return computeScalar(op, b, loc, v);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// cast, transpose and broadcast: a one-operand kernel over the result's dimensions whose
/// operand map does the reordering or the replication.
template <typename Op>
struct MapLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    NamedTensorType resultType = namedType(op.getResult());
    Operand operand{op.getInput(), adaptor.getInput()};
    Value result = buildElementwise(
        rewriter, op.getLoc(), resultType, operand,
        [&](OpBuilder &b, Location loc, ArrayRef<Value> v) {
          return convertScalar(b, loc, v[0], resultType.getElementType());
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConstantLowering : OpConversionPattern<mt::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::ConstantOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    NamedTensorType type = namedType(op.getResult());
    auto value = rewriter.getFloatAttr(type.getElementType(), op.getValue().convertToDouble());
    rewriter.replaceOp(op, fill(rewriter, op.getLoc(), type, value));
    return success();
  }
};

/// The runtime's loss scale of the call in progress, read once where the op was.
struct LossScaleLowering : OpConversionPattern<mt::LossScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::LossScaleOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value scale = func::CallOp::create(rewriter, loc, kLossScaleFunction.str(),
                                       TypeRange{rewriter.getF32Type()}, ValueRange{})
                      .getResult(0);
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(
        op, builtinType(namedType(op.getResult())), ValueRange{scale});
    return success();
  }
};

enum class ReduceKind { Sum, Mean, Max };

/// A reduction iterates over the result's dimensions (parallel) followed by the reduced
/// ones in operand order (reduction), so that the parallel loops are the outer ones.
template <typename Op, ReduceKind kind>
struct ReduceLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType inputType = namedType(op.getInput());
    NamedTensorType resultType = namedType(op.getResult());
    auto floatType = cast<FloatType>(resultType.getElementType());
    SmallVector<StringAttr> space(resultType.getDimNames());
    for (StringAttr name : inputType.getDimNames())
      if (!resultType.hasDim(name.getValue()))
        space.push_back(name);

    TypedAttr identity =
        kind == ReduceKind::Max
            ? TypedAttr(FloatAttr::get(
                  floatType, APFloat::getInf(floatType.getFloatSemantics(), /*Negative=*/true)))
            : TypedAttr(rewriter.getFloatAttr(floatType, 0.0));
    Value init = fill(rewriter, loc, resultType, identity);

    SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                               utils::IteratorType::parallel);
    iterators.append(space.size() - resultType.getRank(), utils::IteratorType::reduction);
    SmallVector<AffineMap> maps{mapInto(space, inputType), mapInto(space, resultType)};
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(resultType)}, ValueRange{adaptor.getInput()},
        ValueRange{init}, maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value combined = kind == ReduceKind::Max
                               ? Value(arith::MaximumFOp::create(b, l, args[0], args[1]))
                               : Value(arith::AddFOp::create(b, l, args[0], args[1]));
          linalg::YieldOp::create(b, l, combined);
        });
    Value result = generic.getResult(0);

    if (kind == ReduceKind::Mean) {
      int64_t count = inputType.getNumElements() / std::max<int64_t>(1, resultType.getNumElements());
      result = buildElementwise(rewriter, loc, resultType, Operand{op.getResult(), result},
                                [&](OpBuilder &b, Location l, ArrayRef<Value> v) {
                                  Scalar s{b, l, floatType};
                                  return s.div(v[0], s.c(static_cast<double>(count)));
                                });
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// A contraction as one generic op: it iterates over the result's dimensions (parallel)
/// followed by the contracted ones (reduction), accumulating lhs * rhs into a zero fill.
Value buildContractGeneric(OpBuilder &builder, Location loc, mt::ContractOp op, Value lhs,
                           Value rhs) {
  NamedTensorType resultType = namedType(op.getResult());
  Value init = fill(builder, loc, resultType,
                    builder.getFloatAttr(resultType.getElementType(), 0.0));
  SmallVector<StringAttr> space(resultType.getDimNames());
  for (StringAttr name : op.getOver().getAsRange<StringAttr>())
    space.push_back(name);
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  iterators.append(space.size() - resultType.getRank(), utils::IteratorType::reduction);
  SmallVector<AffineMap> maps{mapInto(space, namedType(op.getLhs())),
                              mapInto(space, namedType(op.getRhs())),
                              mapInto(space, resultType)};
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{builtinType(resultType)}, ValueRange{lhs, rhs},
      ValueRange{init}, maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
        Value product = arith::MulFOp::create(b, l, args[0], args[1]);
        linalg::YieldOp::create(b, l, ValueRange{arith::AddFOp::create(b, l, args[2], product)});
      });
  return generic.getResult(0);
}

/// The dimensions of a contraction in their roles in a batched matrix product
/// C[b] = A[b] x B[b]: batch dimensions are in both operands and the result, rows only in
/// the lhs and the result, columns only in the rhs and the result, and the contracted ones
/// in both operands. Every dimension has exactly one role (mt.contract's verifier puts
/// every dimension that is not contracted into the result). Each list keeps the order of
/// the operand it is read from (batch and rows: the lhs, which is also the result's order;
/// columns: the rhs; contracted: the lhs), so that the common layouts need no transpose.
struct GemmRoles {
  SmallVector<StringAttr> batch, rows, columns, contracted;

  explicit GemmRoles(mt::ContractOp op) {
    NamedTensorType lhs = namedType(op.getLhs()), rhs = namedType(op.getRhs());
    auto over = op.getOver().getAsRange<StringAttr>();
    for (StringAttr name : lhs.getDimNames()) {
      if (llvm::is_contained(over, name))
        contracted.push_back(name);
      else if (rhs.hasDim(name.getValue()))
        batch.push_back(name);
      else
        rows.push_back(name);
    }
    for (StringAttr name : rhs.getDimNames())
      if (!lhs.hasDim(name.getValue()))
        columns.push_back(name);
  }
};

/// The reshapes between a tensor whose dimensions are three consecutive groups (any of
/// which may be empty) and its rank-3 form, one dimension per group (1 for an empty one).
/// The rank-3 form is `collapse(grouped)` then `expand(padded)`; the way back is the
/// inverse, `collapse(padded)` then `expand(grouped)`. Either step is left out when it
/// would change nothing.
struct Rank3Reshape {
  /// The full dimensions -> one dimension per non-empty group.
  SmallVector<ReassociationIndices> grouped;
  /// The non-empty groups -> the three dimensions; the unit dimension of an empty group
  /// joins the next non-empty group, or the last one when none follows.
  SmallVector<ReassociationIndices> padded;
  /// The position among the three of each non-empty group.
  SmallVector<int64_t> positions;
  int64_t rank = 0;

  explicit Rank3Reshape(std::array<size_t, 3> groupLengths) {
    ReassociationIndices pending;
    for (auto [position, length] : llvm::enumerate(groupLengths)) {
      pending.push_back(static_cast<int64_t>(position));
      if (length == 0)
        continue;
      positions.push_back(static_cast<int64_t>(position));
      ReassociationIndices &group = grouped.emplace_back();
      for (size_t i = 0; i < length; ++i)
        group.push_back(rank++);
      padded.push_back(std::move(pending));
      pending.clear();
    }
    if (!padded.empty())
      llvm::append_range(padded.back(), pending);
  }

  Value toRank3(OpBuilder &b, Location loc, Value value) const {
    auto type = cast<RankedTensorType>(value.getType());
    if (static_cast<int64_t>(grouped.size()) != rank)
      value = tensor::CollapseShapeOp::create(b, loc, value, grouped);
    if (padded.size() == 3)
      return value;
    SmallVector<int64_t> sizes;
    for (const ReassociationIndices &group : grouped)
      sizes.push_back(llvm::product_of(
          llvm::map_range(group, [&](int64_t dim) { return type.getDimSize(dim); })));
    SmallVector<int64_t> shape(3, 1);
    for (auto [position, size] : llvm::zip_equal(positions, sizes))
      shape[position] = size;
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), value, padded);
  }

  Value fromRank3(OpBuilder &b, Location loc, Value value, RankedTensorType type) const {
    if (padded.size() != 3)
      value = tensor::CollapseShapeOp::create(b, loc, value, padded);
    if (static_cast<int64_t>(grouped.size()) == rank)
      return value;
    return tensor::ExpandShapeOp::create(b, loc, type, value, grouped);
  }
};

/// The names `from` reordered as `to` lists them, as a transpose permutation (position i
/// of the result is position permutation[i] of `from`).
SmallVector<int64_t> permutationBetween(ArrayRef<StringAttr> from, ArrayRef<StringAttr> to) {
  return llvm::map_to_vector(
      to, [&](StringAttr name) -> int64_t { return llvm::find(from, name) - from.begin(); });
}

/// An f32 contraction is a `linalg.batch_matmul`, which the CPU backend turns into a BLAS
/// call: each operand is transposed into [batch..., rows..., contracted...] (lhs) or
/// [batch..., contracted..., columns...] (rhs) where its order differs and collapsed to
/// rank 3; the [b, m, n] product, accumulated into a zero fill, is expanded to
/// [batch..., rows..., columns...] and transposed into the result's order. Other element
/// types keep one generic op: no library routine would run them.
struct ContractLowering : OpConversionPattern<mt::ContractOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::ContractOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType resultType = namedType(op.getResult());
    // bf16 and f16 products accumulate in f32 (the batched product reads the low type and
    // writes f32) and are rounded once, at the end, as GEMMs with f32 accumulation do.
    Type element = resultType.getElementType();
    auto floatElement = dyn_cast<FloatType>(element);
    bool lowPrecision = floatElement && floatElement.getWidth() < 32;
    Type accumulator = lowPrecision ? rewriter.getF32Type() : element;
    if (!accumulator.isF32()) {
      rewriter.replaceOp(
          op, buildContractGeneric(rewriter, loc, op, adaptor.getLhs(), adaptor.getRhs()));
      return success();
    }

    GemmRoles roles(op);
    auto asMatrices = [&](Value value, NamedTensorType type,
                       std::array<ArrayRef<StringAttr>, 3> groups) {
      SmallVector<StringAttr> order;
      for (ArrayRef<StringAttr> group : groups)
        llvm::append_range(order, group);
      Value ordered = transposed(rewriter, loc, value,
                                 permutationBetween(type.getDimNames(), order));
      return Rank3Reshape({groups[0].size(), groups[1].size(), groups[2].size()})
          .toRank3(rewriter, loc, ordered);
    };
    Value lhs = asMatrices(adaptor.getLhs(), namedType(op.getLhs()),
                        {roles.batch, roles.rows, roles.contracted});
    Value rhs = asMatrices(adaptor.getRhs(), namedType(op.getRhs()),
                        {roles.batch, roles.contracted, roles.columns});

    auto lhsType = cast<RankedTensorType>(lhs.getType());
    auto rhsType = cast<RankedTensorType>(rhs.getType());
    SmallVector<int64_t> productShape{lhsType.getDimSize(0), lhsType.getDimSize(1),
                                      rhsType.getDimSize(2)};
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(accumulator, 0.0));
    Value empty = tensor::EmptyOp::create(rewriter, loc, productShape, accumulator);
    Value init = linalg::FillOp::create(rewriter, loc, zero, empty).getResult(0);
    Value product =
        linalg::BatchMatmulOp::create(rewriter, loc, ValueRange{lhs, rhs}, ValueRange{init})
            .getResult(0);

    SmallVector<StringAttr> productOrder(roles.batch);
    llvm::append_range(productOrder, roles.rows);
    llvm::append_range(productOrder, roles.columns);
    SmallVector<int64_t> productSizes = llvm::map_to_vector(productOrder, [&](StringAttr name) {
      return resultType.getDimSizes()[*resultType.getDimIndex(name.getValue())];
    });
    Value expanded =
        Rank3Reshape({roles.batch.size(), roles.rows.size(), roles.columns.size()})
            .fromRank3(rewriter, loc, product, RankedTensorType::get(productSizes, accumulator));
    Value result = transposed(rewriter, loc, expanded,
                              permutationBetween(productOrder, resultType.getDimNames()));
    if (lowPrecision)
      result = buildPointwise(rewriter, loc, resultType, result,
                              [&](OpBuilder &b, Location l, Value x) {
                                return convertScalar(b, l, x, element);
                              });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Whether the pass lowers `op`.
bool isSupported(Operation *op) {
  return isa<mt::ConstantOp, mt::LossScaleOp, mt::AddOp, mt::SubOp, mt::MulOp, mt::DivOp, mt::MaxOp, mt::PowOp,
             mt::GreaterOp, mt::NegOp, mt::ExpOp, mt::LogOp, mt::SqrtOp, mt::RsqrtOp,
             mt::TanhOp, mt::SigmoidOp, mt::ReluOp, mt::SiluOp, mt::GeluOp, mt::GeluGradOp,
             mt::CosOp, mt::CastOp, mt::TransposeOp, mt::BroadcastOp, mt::ReduceSumOp,
             mt::ReduceMeanOp, mt::ReduceMaxOp, mt::ContractOp,
             // ShapeOpsToLinalg.cpp
             mt::RenameOp, mt::SplitOp, mt::MergeOp, mt::IotaOp,
             // GatherScatterToLinalg.cpp
             mt::GatherOp, mt::EmbeddingGradOp,
             // RopeDropoutToLinalg.cpp
             mt::RopeOp, mt::DropoutOp,
             // TopKToLinalg.cpp
             mt::TopKOp, mt::TopKGradOp,
             // MoEToLinalg.cpp
             mt::DispatchOp, mt::ExpertLoadOp, mt::CombineOp, mt::CombineGradOp,
             mt::LoadBalancingLossOp, mt::LoadBalancingLossGradOp,
             // AttentionToLinalg.cpp
             mt::AttentionOp, mt::AttentionGradOp,
             // ScanToSCF.cpp
             mt::RepeatOp>(op);
}

} // namespace

Value codegen::lowering::buildPointwise(OpBuilder &builder, Location loc, NamedTensorType type,
                                        Value input,
                                        function_ref<Value(OpBuilder &, Location, Value)> body) {
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps(2, builder.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{builtinType(type)}, ValueRange{input},
      ValueRange{emptyTensor(builder, loc, type)}, maps, iterators,
      [&](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(b, l, ValueRange{body(b, l, args[0])});
      });
  return generic.getResult(0);
}

LogicalResult codegen::lowering::declareRuntimeFunctions(
    ModuleOp module, ArrayRef<std::pair<StringRef, FunctionType>> declarations,
    StringRef purpose) {
  OpBuilder builder(module.getContext());
  for (auto [name, type] : declarations) {
    if (Operation *existing = module.lookupSymbol(name)) {
      auto func = dyn_cast<func::FuncOp>(existing);
      if (func && func.isExternal() && func.getFunctionType() == type)
        continue;
      return existing->emitOpError() << "'" << name << "' is reserved for " << purpose
                                     << ": it must be an external function of type " << type;
    }
    builder.setInsertionPointToStart(module.getBody());
    func::FuncOp::create(builder, module.getLoc(), name, type).setPrivate();
  }
  return success();
}

LogicalResult codegen::lowering::declareLossScaleFunction(ModuleOp module) {
  bool scaled = false;
  module.walk([&](mt::LossScaleOp) {
    scaled = true;
    return WalkResult::interrupt();
  });
  if (!scaled)
    return success();
  Builder builder(module.getContext());
  std::pair<StringRef, FunctionType> declarations[] = {
      {kLossScaleFunction, builder.getFunctionType({}, {builder.getF32Type()})}};
  return declareRuntimeFunctions(module, declarations, "the loss scale");
}

namespace {

struct MTToLinalgPass : codegen::impl::MTToLinalgPassBase<MTToLinalgPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    MTToLinalgPassBase::getDependentDialects(registry);
    registry.insert<bufferization::BufferizationDialect, memref::MemRefDialect,
                    scf::SCFDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();

    // Every unsupported op is reported before anything changes.
    bool unsupported = false;
    module.walk([&](func::FuncOp func) {
      func.walk([&](Operation *op) {
        if (isa<mt::MTDialect>(op->getDialect()) && !isSupported(op)) {
          op->emitOpError("cannot be lowered to linalg: mt-to-linalg does not handle this op "
                          "yet (run mt-decompose first for norms, softmax and cross-entropy, "
                          "and for attention unless it is fused)");
          unsupported = true;
        }
      });
    });
    if (unsupported || failed(declareDropoutFunctions(module)) ||
        failed(declareLossScaleFunction(module)) ||
        failed(declareMeshFunctions(module)))
      return signalPassFailure();

    TypeConverter types;
    types.addConversion([](Type type) { return type; });
    types.addConversion([](NamedTensorType type) -> Type { return builtinType(type); });
    types.addConversion([](mtp::ShardedTensorType type) -> Type {
      return builtinType(type.getLocalType());
    });

    ConversionTarget target(*context);
    target.addLegalDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                           linalg::LinalgDialect, math::MathDialect, memref::MemRefDialect,
                           scf::SCFDialect, tensor::TensorDialect>();
    target.addIllegalDialect<mtp::MTPDialect>();
    // mt ops outside functions (parameters, optimizer state) are not code.
    target.addDynamicallyLegalDialect<mt::MTDialect>(
        [](Operation *op) { return !op->getParentOfType<func::FuncOp>(); });
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp func) {
      return types.isSignatureLegal(func.getFunctionType()) && types.isLegal(&func.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return types.isLegal(op); });

    RewritePatternSet patterns(context);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, types);
    populateReturnOpTypeConversionPattern(patterns, types);
    populateCallOpTypeConversionPattern(patterns, types);
    patterns.add<ConstantLowering, LossScaleLowering, ContractLowering,
                 ElementwiseLowering<mt::AddOp>, ElementwiseLowering<mt::SubOp>,
                 ElementwiseLowering<mt::MulOp>, ElementwiseLowering<mt::DivOp>,
                 ElementwiseLowering<mt::MaxOp>, ElementwiseLowering<mt::PowOp>,
                 ElementwiseLowering<mt::GreaterOp>, ElementwiseLowering<mt::NegOp>,
                 ElementwiseLowering<mt::ExpOp>, ElementwiseLowering<mt::LogOp>,
                 ElementwiseLowering<mt::SqrtOp>, ElementwiseLowering<mt::RsqrtOp>,
                 ElementwiseLowering<mt::TanhOp>, ElementwiseLowering<mt::SigmoidOp>,
                 ElementwiseLowering<mt::ReluOp>, ElementwiseLowering<mt::SiluOp>,
                 ElementwiseLowering<mt::GeluOp>, ElementwiseLowering<mt::GeluGradOp>,
                 ElementwiseLowering<mt::CosOp>, MapLowering<mt::CastOp>,
                 MapLowering<mt::TransposeOp>, MapLowering<mt::BroadcastOp>,
                 ReduceLowering<mt::ReduceSumOp, ReduceKind::Sum>,
                 ReduceLowering<mt::ReduceMeanOp, ReduceKind::Mean>,
                 ReduceLowering<mt::ReduceMaxOp, ReduceKind::Max>>(types, context);
    populateShapeOpPatterns(types, patterns);
    populateGatherScatterPatterns(types, patterns);
    populateRopeDropoutPatterns(types, patterns);
    populateTopKPatterns(types, patterns);
    populateMoEPatterns(types, patterns);
    populateAttentionPatterns(types, patterns);
    populateScanPatterns(types, patterns);
    populateCollectivePatterns(types, patterns);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // Constants folded into every kernel that reads them leave a dead fill behind.
    module.walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
        if (isOpTriviallyDead(&op))
          op.erase();
    });
  }
};

} // namespace

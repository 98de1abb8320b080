//===- RopeDropoutToLinalg.cpp - rope and dropout to linalg ---------------===//
//
// Two elementwise kernels whose value depends on where the element is: a `linalg.generic`
// over the operand's dimensions (identity maps) reading its position with `linalg.index`.
//
// `mt.rope` rotates the pairs (2j, 2j+1) of the rotated dimension, in f64 as the reference
// interpreter does (so long sequences keep the angle `position * theta^(-2j/size)` exact to
// the element type):
//
//     even i: x_i cos(a) - x_{i+1} sin(a)       odd i: x_{i-1} sin(a) + x_i cos(a)
//
// with the angle negated under `inverse`. The angle depends only on the pair j = i / 2 and
// the position, so a first generic computes the tables cos(a) and sin(a) over [pair,
// position] (positions innermost: the power, the same for a whole row, is loop-invariant
// there) and the rotation reads them at (i floordiv 2, position): pow, cos and sin run once
// per pair and position instead of once per element (libm calls, a quarter of
// mixtral-tiny's step when they ran for every element of every batch row and head). The
// rotation reads its own element through the map and its pair partner (index i ^ 1 along
// the rotated dimension) with `tensor.extract`. mtc-fuse-elementwise leaves the tables their
// own kernel (compiler/fusion/FusionRule.h: a costly producer is not fused into a consumer
// that reads it broadcast). On a part of a tensor split along the position dimension
// (context parallelism), the positions are offset by where the part starts. With position
// ids (packed documents: positions restart at each document), the tables cover the whole
// sequence's positions and the rotation reads them at (i floordiv 2, id).
//
// `mt.dropout` reads the key of its site from the runtime once (kDropoutKeyFunction, five
// calls before the kernel) and decides every element in the kernel with
// kDropoutKeepFunction, Philox linked into the object (see MTToLinalg.h for the contract):
// the element's counter is its global sample (its `batch` coordinate) times 2^40 plus its
// row-major offset over the other dimensions of the op's (global) type, so that a sample's
// mask does not depend on the micro-batch it is in (runtime/exec/DropoutKey.h). The product is
// computed in f32 (f64 for f64 tensors). Rate 0 keeps every element (Philox's u < 1 always
// holds) and lowers to nothing.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "dialects/mtp/IR/MTPOps.h"
#include "runtime/support/Philox.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// An `index` as an f64 (indices are non-negative).
Value indexToF64(OpBuilder &b, Location loc, Value index) {
  Value integer = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
  return arith::UIToFPOp::create(b, loc, b.getF64Type(), integer);
}

Value f64Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value));
}

struct RopeLowering : OpConversionPattern<mt::RopeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::RopeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    NamedTensorType type = namedType(op.getInput());
    unsigned rank = type.getRank();
    unsigned dim = *type.getDimIndex(op.getDim());
    unsigned positionDim = *type.getDimIndex(op.getPosition());
    double size = static_cast<double>(type.getDimSizes()[dim]);
    double theta = op.getTheta().convertToDouble();
    double sign = op.getInverse() ? -1.0 : 1.0;
    Type element = type.getElementType();
    Value input = adaptor.getInput();
    // A rank's part of a sequence split over ranks rotates by its global positions (the
    // op's `mtp.layout`). Position ids (packed documents) are values below the sequence's
    // global size, sliced as the input is: the tables then cover every position the whole
    // sequence has, and the rotation reads them at the element's id.
    std::optional<PartPositions> positions;
    int64_t tablePositions = type.getDimSizes()[positionDim];
    mtp::ShardedTensorType sharded = mtp::getLocalLayout(op);
    Value ids = adaptor.getPositions();
    if (ids && sharded)
      tablePositions = sharded.getGlobal().getDimSize(op.getPosition());
    else if (sharded)
      positions.emplace(rewriter, op.getLoc(), sharded, op.getPosition());
    Location loc = op.getLoc();
    Type f64 = rewriter.getF64Type();
    int64_t pairs = type.getDimSizes()[dim] / 2;
    SmallVector<int64_t> tableShape = {pairs, tablePositions};
    auto tableType = RankedTensorType::get(tableShape, f64);
    AffineMap tableIdentity = rewriter.getMultiDimIdentityMap(2);
    SmallVector<utils::IteratorType> tableIterators(2, utils::IteratorType::parallel);
    auto tables = linalg::GenericOp::create(
        rewriter, loc, TypeRange{tableType, tableType}, ValueRange{},
        ValueRange{tensor::EmptyOp::create(rewriter, loc, tableShape, f64),
                   tensor::EmptyOp::create(rewriter, loc, tableShape, f64)},
        SmallVector<AffineMap>{tableIdentity, tableIdentity}, tableIterators,
        [&](OpBuilder &b, Location l, ValueRange) {
          Value pair = indexToF64(b, l, linalg::IndexOp::create(b, l, 0));
          Value positionIndex = linalg::IndexOp::create(b, l, 1);
          if (positions)
            positionIndex = positions->at(b, l, positionIndex);
          // theta^(-2 pair / size) and the angle, in the interpreter's order of operations.
          Value exponent = arith::DivFOp::create(
              b, l, arith::MulFOp::create(b, l, f64Constant(b, l, -2.0), pair),
              f64Constant(b, l, size));
          Value frequency = math::PowFOp::create(b, l, f64Constant(b, l, theta), exponent);
          Value position = indexToF64(b, l, positionIndex);
          Value angle = arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, f64Constant(b, l, sign), position), frequency);
          linalg::YieldOp::create(
              b, l, ValueRange{math::CosOp::create(b, l, angle), math::SinOp::create(b, l, angle)});
        });

    MLIRContext *context = rewriter.getContext();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    SmallVector<Value> inputs = {input};
    SmallVector<AffineMap> maps = {identity};
    if (ids) {
      // The ids over their own dimensions, a subset of the input's.
      SmallVector<AffineExpr> idExprs;
      for (const mt::NamedDim &d : namedType(op.getPositions()).getDims())
        idExprs.push_back(getAffineDimExpr(*type.getDimIndex(d.name.getValue()), context));
      inputs.push_back(ids);
      maps.push_back(AffineMap::get(rank, 0, idExprs, context));
    } else {
      AffineMap tableMap = AffineMap::get(rank, 0,
                                          {getAffineDimExpr(dim, context).floorDiv(2),
                                           getAffineDimExpr(positionDim, context)},
                                          context);
      llvm::append_range(inputs, tables.getResults());
      maps.append({tableMap, tableMap});
    }
    maps.push_back(identity);
    auto rotation = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(type)}, inputs,
        ValueRange{emptyTensor(rewriter, loc, type)}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          SmallVector<Value> coords;
          for (unsigned d = 0; d < rank; ++d)
            coords.push_back(linalg::IndexOp::create(b, l, d));
          Value i = coords[dim], one = indexConstant(b, l, 1);
          Value cos, sin;
          if (ids) {
            Value id = arith::IndexCastOp::create(b, l, b.getIndexType(), args[1]);
            Value pair = arith::ShRUIOp::create(b, l, i, one);
            cos = tensor::ExtractOp::create(b, l, tables.getResult(0), ValueRange{pair, id});
            sin = tensor::ExtractOp::create(b, l, tables.getResult(1), ValueRange{pair, id});
          } else {
            cos = args[1];
            sin = args[2];
          }
          coords[dim] = arith::XOrIOp::create(b, l, i, one);
          Value partner = tensor::ExtractOp::create(b, l, input, coords);
          // even: x cos - partner sin; odd: x cos + partner sin.
          Value isOdd = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne,
                                              arith::AndIOp::create(b, l, i, one),
                                              indexConstant(b, l, 0));
          Value signedSin =
              arith::SelectOp::create(b, l, isOdd, sin, arith::NegFOp::create(b, l, sin));
          Value x = convertScalar(b, l, args[0], f64);
          Value y = convertScalar(b, l, partner, f64);
          Value rotated = arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, x, cos),
                                                arith::MulFOp::create(b, l, y, signedSin));
          linalg::YieldOp::create(b, l, ValueRange{convertScalar(b, l, rotated, element)});
        });
    rewriter.replaceOp(op, rotation.getResult(0));
    return success();
  }
};

struct DropoutLowering : OpConversionPattern<mt::DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::DropoutOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    double rate = op.getRate().convertToDouble();
    if (rate == 0) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    NamedTensorType type = namedType(op.getInput());
    Type element = type.getElementType();
    Type compute = element.isF64() ? element : rewriter.getF32Type();
    auto stream = static_cast<int64_t>(op.getStream());
    // A rank's part of a split tensor numbers its elements as the whole tensor does: the
    // masks do not depend on the layout. Dimension d of the part is at `positions[d]`.
    mtp::ShardedTensorType sharded = mtp::getLocalLayout(op);
    NamedTensorType global = type;
    SmallVector<std::optional<PartPositions>> positions(type.getRank());
    if (sharded) {
      global = sharded.getGlobal();
      for (unsigned d = 0; d < type.getRank(); ++d)
        positions[d].emplace(rewriter, op.getLoc(), sharded, type.getDimNames()[d].getValue());
    }
    // The key of this site in the call in progress (the layer instance is current here).
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    Value site = arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(stream));
    auto keyWord = [&](mtc_dropout_key_word word) -> Value {
      Value args[] = {site,
                      arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(word))};
      return func::CallOp::create(rewriter, loc, kDropoutKeyFunction.str(), TypeRange{i64}, args)
          .getResult(0);
    };
    Value seed = keyWord(MTC_DROPOUT_KEY_SEED);
    Value tensorId = arith::TruncIOp::create(rewriter, loc, i32, keyWord(MTC_DROPOUT_KEY_TENSOR_ID));
    Value step = arith::TruncIOp::create(rewriter, loc, i32, keyWord(MTC_DROPOUT_KEY_STEP));
    Value indexBase = keyWord(MTC_DROPOUT_KEY_INDEX_BASE);
    Value active = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ne,
                                         keyWord(MTC_DROPOUT_KEY_ACTIVE),
                                         arith::ConstantOp::create(rewriter, loc,
                                                                   rewriter.getI64IntegerAttr(0)));
    // Philox.h compares with an f32 keep probability; kept elements scale by its f32 inverse.
    auto keep = static_cast<float>(1.0 - rate);
    Value result = buildPointwise(
        rewriter, loc, type, adaptor.getInput(), [&](OpBuilder &b, Location l, Value x) {
          // The element's counter: its sample (its global `batch` coordinate) times 2^40
          // plus its row-major offset over the other dimensions of the (global) tensor.
          Value offset = indexConstant(b, l, 0);
          int64_t stride = 1;
          for (unsigned d = type.getRank(); d-- > 0;) {
            Value index = linalg::IndexOp::create(b, l, d);
            if (positions[d])
              index = positions[d]->at(b, l, index);
            bool isBatch = type.getDimNames()[d].getValue() == mt::MTDialect::kBatchDimName;
            int64_t scale = isBatch ? MTC_DROPOUT_SAMPLE_STRIDE : stride;
            offset = arith::AddIOp::create(
                b, l, offset, arith::MulIOp::create(b, l, index, indexConstant(b, l, scale)));
            if (!isBatch)
              stride *= global.getDimSizes()[d];
          }
          Value args[] = {
              seed, tensorId,
              arith::AddIOp::create(b, l, indexBase,
                                    arith::IndexCastUIOp::create(b, l, b.getI64Type(), offset)),
              step, arith::ConstantOp::create(b, l, b.getF32FloatAttr(keep))};
          Value kept = func::CallOp::create(b, l, kDropoutKeepFunction.str(),
                                            TypeRange{b.getI32Type()}, args)
                           .getResult(0);
          Value isKept = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::ne, kept,
              arith::ConstantOp::create(b, l, b.getI32IntegerAttr(0)));
          auto f32Constant = [&](float value) -> Value {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(value));
          };
          Value scale = arith::SelectOp::create(
              b, l, active,
              arith::SelectOp::create(b, l, isKept, f32Constant(1.0f / keep), f32Constant(0.0f)),
              f32Constant(1.0f));
          Value product = arith::MulFOp::create(b, l, convertScalar(b, l, x, compute),
                                                convertScalar(b, l, scale, compute));
          return convertScalar(b, l, product, element);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

LogicalResult codegen::lowering::declareDropoutFunctions(ModuleOp module) {
  bool hasDropout = false;
  module.walk([&](mt::DropoutOp op) {
    if (op.getRate().convertToDouble() != 0)
      hasDropout = true;
  });
  if (!hasDropout)
    return success();
  Builder builder(module.getContext());
  Type i64 = builder.getI64Type();
  // The key, the decision, and the layer instance the key depends on (set by scans, see
  // ScanToSCF.cpp).
  std::pair<StringRef, FunctionType> declarations[] = {
      {kDropoutKeyFunction, builder.getFunctionType({i64, i64}, {i64})},
      {kDropoutKeepFunction,
       builder.getFunctionType({i64, builder.getI32Type(), i64, builder.getI32Type(),
                                builder.getF32Type()},
                               {builder.getI32Type()})},
      {kDropoutLayerFunction, builder.getFunctionType({i64}, {})},
  };
  return declareRuntimeFunctions(module, declarations, "dropout");
}

void codegen::lowering::populateRopeDropoutPatterns(const TypeConverter &types,
                                                    RewritePatternSet &patterns) {
  patterns.add<RopeLowering, DropoutLowering>(types, patterns.getContext());
}
